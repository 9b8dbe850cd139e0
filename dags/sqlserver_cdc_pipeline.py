"""
The tasks both example DAGs share: settings from sqlserver_cdc_config.yaml, and the replication chain.

Not a DAG itself (listed in .airflowignore); the DAG files import it from the DAGs folder.

Per run, for every capture instance in the settings (or in the Variable ``<dag_id>__tables``)::

    tables -> plan -+-> snapshot[ci to snapshot] ----------------------+
                    +-> wait_for_capture[ci] -> extract[ci] -----------+-> merge -> commit_watermarks

``plan`` (CdcLoadPlanOperator) snapshots a capture instance that has no watermark yet (first
run, or its watermark Variable was deleted), that ``dag_run.conf["resnapshot"]`` names, or whose
changes after the watermark were cleaned up; the others get the run's change window.
``snapshot`` and ``wait_for_capture``/``extract`` are mapped over the capture instances of each
path (a mapped task with nothing to do is skipped). One Spark application merges
every window of the run: Spark's start-up dominates a small merge, and each target table is its
own Iceberg commit, so a failure leaves the other tables committed and the retry skips them.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from airflow.sdk import TriggerRule, Variable, task

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.snapshot import CdcLoadPlanOperator, CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor

log = logging.getLogger(__name__)

CONFIG_PATH = Path(__file__).resolve().parent / "sqlserver_cdc_config.yaml"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_environment(text: str) -> str:
    """
    Replace ``${NAME}`` and ``${NAME:-default}`` with environment values (comment lines are left alone).

    :param text: the configuration text.
    """

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name)
        if value:
            return value
        if default is None:
            raise ValueError(
                f"{CONFIG_PATH.name} uses ${{{name}}}, which is not set in the environment; "
                f"set it or write ${{{name}:-default}}"
            )
        return default

    return "".join(
        line if line.lstrip().startswith("#") else _ENV_REFERENCE.sub(replace, line)
        for line in text.splitlines(keepends=True)
    )


@dataclass(frozen=True)
class ReplicationSettings:
    """The parsed sqlserver_cdc_config.yaml (see the comments in that file)."""

    raw: dict[str, Any]

    @classmethod
    def load(cls, path: Path = CONFIG_PATH) -> ReplicationSettings:
        """Read and validate the YAML file (environment references expanded)."""
        data = yaml.safe_load(expand_environment(path.read_text()))
        missing = [k for k in ("source", "tables", "staging_path", "merge", "spark") if k not in data]
        if missing:
            raise ValueError(f"{path}: missing section(s) {', '.join(missing)}")
        if data["merge"].get("delete_mode", "soft") not in ("soft", "hard"):
            raise ValueError(f"{path}: merge.delete_mode must be soft or hard")
        return cls(data)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    @property
    def conn_id(self) -> str:
        """The Airflow connection of the source server."""
        return self.raw["source"]["conn_id"]

    @property
    def database(self) -> str | None:
        """The source database (None: the connection's schema)."""
        return self.raw["source"].get("database")

    @property
    def server_time_zone(self) -> str | None:
        """IANA zone of the server, when it observes daylight-saving time."""
        return self.raw["source"].get("server_time_zone")

    @property
    def start_date(self) -> dt.datetime:
        """The DAG's start date."""
        return dt.datetime.fromisoformat(str(self.raw.get("start_date", "2026-01-01T00:00:00+00:00")))

    @property
    def spark_jars(self) -> str | None:
        """Comma-separated jars for spark-submit (None when the cluster provides Iceberg)."""
        return self.raw["spark"].get("jars") or None

    @property
    def spark_conf(self) -> dict[str, str]:
        """Spark settings: Iceberg's SQL extensions and the target catalog."""
        return {str(k): str(v) for k, v in (self.raw["spark"].get("conf") or {}).items()}

    def default_args(self) -> dict[str, Any]:
        """Retries for every task; safe because each step is idempotent (see the DAG docstrings)."""
        return {
            "retries": int(self.raw.get("retries", 3)),
            "retry_delay": dt.timedelta(seconds=float(self.raw.get("retry_delay_seconds", 120))),
        }


def tables_variable_key(dag_id: str) -> str:
    """The Airflow Variable whose JSON list of capture instances replaces ``tables`` at run time."""
    return f"{dag_id}__tables"


def capture_instances(settings: ReplicationSettings, dag_id: str) -> list[str]:
    """
    The capture instances to replicate: the Variable ``<dag_id>__tables`` if set, else the YAML's ``tables``.

    :param settings: the DAG's settings.
    :param dag_id: the DAG whose Variable is read.
    """
    key = tables_variable_key(dag_id)
    override = Variable.get(key, default=None)
    if override is None:
        names = settings["tables"]
    else:
        try:
            names = json.loads(override) if isinstance(override, str) else override
        except ValueError as err:
            raise ValueError(
                f"Airflow Variable {key!r} must hold a JSON list of capture instances, e.g. "
                f'["dbo_orders"]; it holds {override!r} ({err})'
            ) from None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"the tables of {dag_id} must be a list of capture instance names, got {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"the tables of {dag_id} list a capture instance twice: {names}")
    return names


def add_replication_tasks(settings: ReplicationSettings, *, dag_id: str, window_mode: str) -> dict[str, Any]:
    """
    Add the replication chain to the DAG being defined; return its tasks by name.

    :param settings: the settings.
    :param dag_id: the DAG's id (for the Variable that overrides the tables).
    :param window_mode: ``interval`` or ``watermark``.
    """

    @task
    def tables() -> list[str]:
        """The capture instances of this run: the Variable ``<dag_id>__tables``, else the YAML's list."""
        return capture_instances(settings, dag_id)

    @task
    def snapshot_list(names: list[str]) -> list[str]:
        """The capture instances the plan snapshots (a plain XCom, which mapping needs)."""
        return list(names)

    @task
    def extract_list(names: list[str]) -> list[str]:
        """The capture instances the plan extracts a change window for."""
        return list(names)

    source = {
        "sqlserver_cdc_conn_id": settings.conn_id,
        "database": settings.database,
    }
    extract_settings = settings["extract"]
    sensor_settings = settings["sensor"]
    merge_settings = settings["merge"]
    plan = CdcLoadPlanOperator(task_id="plan", capture_instances=tables(), **source)
    to_snapshot = snapshot_list(plan.output["snapshot"])
    to_extract = extract_list(plan.output["extract"])
    snapshot_settings = settings.raw.get("snapshot") or {}
    snapshot = CdcSnapshotOperator.partial(
        task_id="snapshot",
        base_path=settings["staging_path"],
        allow_table_lock_fallback=bool(snapshot_settings.get("allow_table_lock_fallback", False)),
        chunk_rows=int(snapshot_settings.get("chunk_rows", 500_000)),
        server_time_zone=settings.server_time_zone,
        execution_timeout=dt.timedelta(minutes=float(extract_settings.get("execution_timeout_minutes", 30))),
        **source,
    ).expand(capture_instance=to_snapshot)
    wait = LsnSensor.partial(
        task_id="wait_for_capture",
        window_mode=window_mode,
        server_time_zone=settings.server_time_zone,
        mode=sensor_settings.get("mode", "reschedule"),
        deferrable=bool(sensor_settings.get("deferrable", False)),
        poke_interval=float(sensor_settings.get("poke_interval_seconds", 60)),
        timeout=float(sensor_settings.get("timeout_seconds", 3600)),
        retries=0,  # a timeout is an answer (the capture job is behind), not a glitch to retry
        **source,
    ).expand(capture_instance=to_extract)
    extract = CdcExtractOperator.partial(
        task_id="extract",
        base_path=settings["staging_path"],
        window_mode=window_mode,
        server_time_zone=settings.server_time_zone,
        row_filter_option=extract_settings.get("row_filter_option", "all update old"),
        batch_size=int(extract_settings.get("batch_size", 50_000)),
        max_file_bytes=int(extract_settings.get("max_file_bytes", 128 * 1024 * 1024)),
        execution_timeout=dt.timedelta(minutes=float(extract_settings.get("execution_timeout_minutes", 30))),
        **source,
    ).expand(capture_instance=to_extract)
    wait >> extract
    merge = CdcSparkMergeOperator(
        task_id="merge",
        extract_task_ids=[snapshot.task_id, extract.task_id],
        namespace=merge_settings["namespace"],
        table_name_template=merge_settings.get("table_name_template", "{schema}_{table}"),
        delete_mode=merge_settings.get("delete_mode", "soft"),
        write_mode=merge_settings.get("write_mode", "copy-on-write"),
        conn_id=settings["spark"].get("conn_id", "spark_default"),
        jars=settings.spark_jars,
        conf=settings.spark_conf,
        execution_timeout=dt.timedelta(minutes=float(merge_settings.get("execution_timeout_minutes", 60))),
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
    )
    commit = WatermarkCommitOperator(
        task_id="commit_watermarks",
        windows=[snapshot.output, extract.output],
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
    )
    [snapshot, extract] >> merge >> commit
    return {
        "plan": plan,
        "snapshot": snapshot,
        "wait": wait,
        "extract": extract,
        "merge": merge,
        "commit": commit,
    }
