"""
The pipeline's last task: fail the run naming the capture instances that were not merged, and why.

One capture instance's failure stays its own: the merge runs on the windows that exist
(``all_done``; it skips when none exist) and the watermarks of what it merged are committed.
Airflow sets a run's state from its leaf tasks, so a failed ``extract[2]`` upstream of a
successful merge would leave the run green; ``run_outcome`` (``all_done``, the leaf) reads the states of the run's tasks and
fails the run with one line per failed capture instance: the task, the error, and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_sqlserver_cdc.errors import CaptureInstanceRunError
from airflow_provider_sqlserver_cdc.operators.failure_record import FAILURE_XCOM_KEY, MERGE_FAILURE

FAILED_STATES = ("failed", "upstream_failed")
RETENTION_REMEDY = (
    "The next run re-snapshots it (its load plan finds the retention gap); to do it now, trigger the DAG "
    'with conf {{"resnapshot": ["{name}"]}}'
)
GENERIC_REMEDY = (
    "Fix what the message says; the next run continues {name} (its missed changes are taken in, "
    "extract.on_gap heal), or clear the failed task of this run and its merge"
)
MERGE_REMEDY = (
    "The watermark of {name} did not advance: fix what the message says, then clear the failed merge "
    "of this run and its downstream tasks (the tables that committed skip the windows they hold; those "
    "of {name} are merged again), or let the next run extract and merge {name} again from the watermark"
)


def failed_task_instances(
    states: Mapping[str, str | None], task_ids: Sequence[str]
) -> list[tuple[str, int | None, str]]:
    """
    Return ``(task id, map index, state)`` of the watched tasks in a failed state, in ``task_ids`` order.

    :param states: task states as Airflow reports them (``task_id`` or ``task_id_<map index>``).
    :param task_ids: the watched task ids.
    """
    failed = []
    for task_id in task_ids:
        for key, state in sorted(states.items()):
            if state not in FAILED_STATES:
                continue
            if key == task_id:
                failed.append((task_id, None, state))
            elif key.startswith(task_id + "_") and key[len(task_id) + 1 :].isdigit():
                failed.append((task_id, int(key[len(task_id) + 1 :]), state))
    return sorted(failed, key=lambda f: (task_ids.index(f[0]), f[1] if f[1] is not None else -1))


def failure_lines(
    failed: Sequence[tuple[str, int | None, str]],
    records: Mapping[tuple[str, int | None], Mapping[str, Any]],
    names: Mapping[tuple[str, int | None], str],
) -> list[str]:
    """
    Return one line per failed capture instance (or task without one): the task, the error, the remedy.

    A record with an error per capture instance (a merge's failed tables) gives a line for each; a
    record with one error for all (a load plan, a snapshot, a merge that failed as a whole) one line
    naming them. A capture instance already named on an earlier line is not named again.

    :param failed: the failed task instances (:func:`failed_task_instances`).
    :param records: the failure records the tasks pushed (``operators.failure_record``).
    :param names: the capture instance each mapped task instance was for.
    """
    lines: list[str] = []
    seen: set[str] = set()
    root_cause = any(state == "failed" for _, _, state in failed)
    for task_id, index, state in failed:
        label = task_id if index is None else f"{task_id}[{index}]"
        record = records.get((task_id, index))
        if record:
            lines += record_lines(label, record, seen)
            continue
        name = names.get((task_id, index))
        if name is None and state == "upstream_failed" and root_cause:
            continue  # a task that did not run because of a failure listed on its own line
        if name is not None and name in seen:
            continue  # e.g. extract[i] upstream_failed after its wait_for_capture[i] failed
        if name is not None:
            seen.add(name)
            lines.append(f"{name}: {label} is {state}; its task log says why")
        else:
            lines.append(f"{label} is {state}; its task log says why")
    return lines


def record_lines(label: str, record: Mapping[str, Any], seen: set[str]) -> list[str]:
    """
    Return the lines of one failure record, without the capture instances in ``seen`` (then adding its own).

    :param label: the failed task instance, e.g. ``extract[2]`` or ``merge``.
    :param record: its failure record (``operators.failure_record``).
    :param seen: the capture instances named on earlier lines.
    """
    listed = [str(n) for n in record.get("capture_instances") or []]
    fresh = [n for n in dict.fromkeys(listed) if n not in seen]
    if listed and not fresh:
        return []
    seen.update(fresh)
    errors = record.get("errors") or {}
    groups = (
        [(n, errors.get(n, record.get("message"))) for n in fresh]
        if errors
        else [(", ".join(fresh) or None, record.get("message"))]
    )
    lines = []
    for name, message in groups:
        head = f"{name}: {label}" if name else label
        lines.append(
            f"{head} failed with {record.get('error')}: {message} "
            f"-> {remedy(record).format(name=name or 'its capture instances')}"
        )
    return lines


def remedy(record: Mapping[str, Any]) -> str:
    """Return what to do about a failure record, with ``{name}`` for its capture instance(s)."""
    if record.get("kind") == MERGE_FAILURE:
        return MERGE_REMEDY
    return RETENTION_REMEDY if record.get("error") == "RetentionGapError" else GENERIC_REMEDY


def outcome_message(lines: Sequence[str], committed: Sequence[str], *, source: str | None = None) -> str:
    """Return the run's failure message: each failed capture instance, then what was merged anyway.

    :param source: the source of a pipeline with several, named first (``source 'eu' (...)``).
    """
    done = (
        f"The run's other capture instances were merged and their watermarks committed: {', '.join(committed)}"
        if committed
        else "No capture instance of this run was committed"
    )
    head = (
        f"Not every capture instance of {source} was replicated in this run"
        if source
        else ("Not every capture instance of this run was replicated")
    )
    return f"{head}:\n- " + "\n- ".join(lines) + f"\n{done}."


def check_run(
    ti: Any,
    watched_ids: Sequence[str],
    name_lists: Mapping[str, str],
    commit_task_id: str,
    *,
    source: str | None = None,
) -> list[str]:
    """
    Return the capture instances the run committed; raise naming each failed one if any watched task failed.

    :param ti: the running task instance (``run_outcome``'s).
    :param watched_ids: the task ids whose failure fails the run.
    :param name_lists: mapped task id -> the task id whose XCom lists its capture instances by map index.
    :param commit_task_id: the watermark commit, whose result names what was committed.
    :param source: the source of a pipeline with several, named in the message.
    :raises CaptureInstanceRunError: a watched task failed.
    """
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id], task_ids=list(watched_ids))
    failed = failed_task_instances(states.get(ti.run_id, {}), watched_ids)
    committed = [str(o.get("capture_instance")) for o in ti.xcom_pull(task_ids=commit_task_id) or []]
    if not failed:
        return committed
    records: dict[tuple[str, int | None], Mapping[str, Any]] = {}
    names: dict[tuple[str, int | None], str] = {}
    for task_id, index, _ in failed:
        # An unmapped task records its failure too (the load plan: e.g. its source is down).
        record = ti.xcom_pull(
            task_ids=task_id, map_indexes=-1 if index is None else index, key=FAILURE_XCOM_KEY
        )
        if record:
            records[(task_id, index)] = record
        if index is None:
            continue
        listed = ti.xcom_pull(task_ids=name_lists[task_id]) if task_id in name_lists else None
        if listed and index < len(listed):
            names[(task_id, index)] = str(listed[index])
    raise CaptureInstanceRunError(
        outcome_message(failure_lines(failed, records, names), committed, source=source)
    )
