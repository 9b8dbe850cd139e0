"""CdcSparkMergeOperator: spark-submit the provider's merge job for the windows an extract task wrote."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.exceptions import AirflowException
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException, AirflowSkipException

from airflow_provider_sqlserver_cdc.merge_outputs import record_merge_outputs
from airflow_provider_sqlserver_cdc.operators.argument_checks import check_one_of
from airflow_provider_sqlserver_cdc.operators.committed_windows import (
    committed_windows,
    table_capture_instances,
    uncommitted_instances,
)
from airflow_provider_sqlserver_cdc.operators.failure_record import MERGE_FAILURE, record_failure
from airflow_provider_sqlserver_cdc.operators.jdbc_target_connection import (
    JdbcTarget,
    remove_login_file,
    write_login_file,
)
from airflow_provider_sqlserver_cdc.operators.postgres_target import PostgresTargetOperator
from airflow_provider_sqlserver_cdc.operators.spark_job import SparkJobOperator
from airflow_provider_sqlserver_cdc.operators.target_tables import TargetTablesOperator
from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH
from airflow_provider_sqlserver_cdc.spark.merge.arguments import (
    DELETE_MODES,
    POSTGRES_TARGET,
    TARGET_KINDS,
    WRITE_MODES,
    parse_table_properties,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import MERGE_STRATEGIES
from airflow_provider_sqlserver_cdc.spark.merge.result_file import (
    MergeResult,
    ResultFileError,
    result_file_uri,
    window_base,
)
from airflow_provider_sqlserver_cdc.spark.merge.scale_options import (
    DEFAULT_CONCURRENT_TABLES,
    DEFAULT_PARTITION_BUCKETS,
    is_template,
    scale_arguments,
)
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import check_table_modes
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import check_jdbc_url
from airflow_provider_sqlserver_cdc.staging_files import read_text, remove
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_DELETE_MODE,
    DEFAULT_JDBC_CONNECTIONS,
    DEFAULT_MERGE_STRATEGY,
    DEFAULT_TARGET_KIND,
    DEFAULT_WRITE_MODE,
)
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, xcom_items
from airflow_provider_sqlserver_cdc.window.manifest import manifest_uri

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.sdk import Context


def merge_job_arguments(
    manifests: Sequence[str],
    *,
    namespace: str | None = None,
    table_name_template: str | None = None,
    targets: Mapping[str, str] | None = None,
    delete_mode: str = DEFAULT_DELETE_MODE,
    write_mode: str = DEFAULT_WRITE_MODE,
    properties: Mapping[str, str] | None = None,
    jdbc_url: str | None = None,
    jdbc_connections: int = DEFAULT_JDBC_CONNECTIONS,
    jdbc_credentials_file: str | None = None,
    partition_buckets: int | str = DEFAULT_PARTITION_BUCKETS,
    concurrent_tables: int | str = DEFAULT_CONCURRENT_TABLES,
    merge_strategy: str = DEFAULT_MERGE_STRATEGY,
    result_uri: str | None = None,
    table_modes: Mapping[str, str] | None = None,
) -> list[str]:
    """Return the command-line arguments of ``merge_job.py`` (see docs/merge-job.md).

    :param manifests: manifest URIs (or window directories) to merge.
    :param namespace: ``catalog.namespace`` that holds the target tables.
    :param table_name_template: target table name from the manifest's source, e.g. ``{schema}_{table}``.
    :param targets: capture instance -> ``catalog.namespace.table``, overriding the template.
    :param delete_mode: ``soft`` (flag deleted rows) or ``hard`` (remove them; Iceberg: windows in LSN order).
    :param write_mode: Iceberg row-level write mode set when a target is created.
    :param properties: further Iceberg table properties set when a target is created, e.g.
        ``{"write.target-file-size-bytes": "134217728"}``.
    :param jdbc_url: the relational target's JDBC URL (docs/targets-postgres.md), without credentials;
        None for Iceberg.
    :param jdbc_connections: connections that load a batch into the relational target at once.
    :param jdbc_credentials_file: a file (mode 600, where the Spark driver runs) holding the login.
    :param partition_buckets: ``bucket(N, first key)`` of the tables the job creates, or ``auto``; 0
        (default): unpartitioned (docs/merge-performance.md).
    :param concurrent_tables: target tables merged at once; 1 (default): one after another.
    :param merge_strategy: Iceberg: ``auto`` (MERGE or rewrite the table per window, from its file
        statistics), ``merge`` or ``rewrite`` (docs/merge-performance.md).
    :param result_uri: where the job writes its result file (``spark.merge.result_file``).
    :param table_modes: capture instance -> ``current``, ``history`` or ``changelog`` (docs/history-targets.md);
        a capture instance not named is ``current``, or ``changelog`` when it has no key columns.
    """
    property_arguments = table_property_arguments(properties)
    target_arguments: list[str] = []
    if jdbc_url is not None:
        try:
            check_jdbc_url(jdbc_url)
        except MergeJobError as err:
            raise ValueError(str(err)) from None
        target_arguments = ["--target-kind", POSTGRES_TARGET, "--jdbc-url", jdbc_url]
        target_arguments += ["--jdbc-connections", str(jdbc_connections)]
        if jdbc_credentials_file:
            target_arguments += ["--jdbc-credentials-file", jdbc_credentials_file]
    check_one_of("delete_mode", delete_mode, DELETE_MODES)
    check_one_of("write_mode", write_mode, WRITE_MODES)
    check_one_of("merge_strategy", merge_strategy, MERGE_STRATEGIES)
    strategy_arguments = (
        ["--merge-strategy", merge_strategy] if merge_strategy != DEFAULT_MERGE_STRATEGY else []
    )
    arguments: list[str] = []
    for uri in manifests:
        if urlsplit(uri).password:
            raise ValueError(
                f"window URI {urlsplit(uri)._replace(netloc=urlsplit(uri).hostname or '').geturl()} carries "
                "credentials; spark-submit arguments are visible to anyone who can list processes. Configure "
                "storage credentials in the Spark/Hadoop configuration instead"
            )
        arguments += ["--manifest", uri]
    if namespace:
        arguments += ["--namespace", namespace]
    if table_name_template:
        arguments += ["--table-name-template", table_name_template]
    for capture_instance, table in (targets or {}).items():
        arguments += ["--target", f"{capture_instance}={table}"]
    try:
        check_table_modes(table_modes or {}, "table_modes")
    except MergeJobError as err:
        raise ValueError(str(err)) from None
    for capture_instance, mode in (table_modes or {}).items():
        arguments += ["--table-mode", f"{capture_instance}={mode}"]
    if result_uri:
        arguments += ["--result-uri", result_uri]
    return [
        *arguments,
        "--delete-mode",
        delete_mode,
        "--write-mode",
        write_mode,
        *strategy_arguments,
        *property_arguments,
        *target_arguments,
        *scale_arguments(partition_buckets, concurrent_tables),
    ]


def merge_inputs(value: Any) -> tuple[list[str], list[ChangeWindow]]:
    """
    Return the manifest URIs to merge, each once and in order, and the windows among the input.

    Window objects are read with ``ChangeWindow.from_dict``, as the watermark operator reads them
    (``ChangeWindow.from_xcom``); plain text is a manifest URI or a window directory.

    :param value: the extract or snapshot XCom in any shape ``ChangeWindow.from_xcom`` reads, or
        manifest URIs / window directories (the ``windows`` argument).
    """
    uris: list[str] = []
    windows: list[ChangeWindow] = []
    for item in xcom_items(value):
        if isinstance(item, str):
            uri = item
        else:
            window = ChangeWindow.from_dict(item)
            windows.append(window)
            uri = window.manifest_uri
        if manifest_uri(uri) not in uris:
            uris.append(manifest_uri(uri))
    return uris, windows


def window_manifest_uris(value: Any) -> list[str]:
    """Return the manifest URIs of the windows to merge, each once, in order (:func:`merge_inputs`)."""
    return merge_inputs(value)[0]


def window_descriptions(value: Any) -> list[dict[str, Any]]:
    """Return the windows of an extract XCom as their XCom dicts, leaving out bare manifest URIs."""
    return [window.to_xcom() for window in merge_inputs(value)[1]]


def table_property_arguments(properties: Mapping[str, str] | None) -> list[str]:
    """Return ``--table-property KEY=VALUE`` arguments, checked as the merge job checks them."""
    items = [f"{key}={value}" for key, value in (properties or {}).items()]
    try:
        parse_table_properties(items)
    except MergeJobError as err:
        raise ValueError(str(err)) from None
    return [argument for item in items for argument in ("--table-property", item)]


def failed_tables_message(task_id: str, result: MergeResult) -> str | None:
    """Return the task's error naming the tables the job's result reports failed, or None if none did.

    :param task_id: the merge task, for the message.
    :param result: the job's result file (``spark.merge.result_file``).
    """
    failed = result.failed()
    if not failed:
        return None
    committed = [t.table for t in result.committed()]
    return "\n".join(
        [
            f"{task_id}: the merge failed for target table(s) {', '.join(t.table for t in failed)}; "
            f"committed: {', '.join(committed) if committed else 'none'}",
            *(f"- {t.table}: {t.error or 'see the job log'}" for t in failed),
            "Fix the cause and retry the task: the committed tables skip the windows they hold, "
            "only the failed tables' windows are merged again",
        ]
    )


def failed_instance_errors(windows: Sequence[ChangeWindow], result: MergeResult) -> dict[str, str]:
    """Return capture instance -> why its windows were not committed (those the watermark commit leaves out).

    In the windows' order, then the other capture instances the failed tables name; each with the
    errors of the failed tables that name it, each naming its table (a window no table of the result
    names: see the job log).

    :param windows: the windows the merge took.
    :param result: the job's result file.
    """
    errors: dict[str, list[str]] = {
        name: [] for name in uncommitted_instances(windows, committed_windows(windows, result))
    }
    for table in result.failed():
        reason = table.error or "see the job log"
        for name in sorted(table_capture_instances(table)):
            errors.setdefault(name, []).append(
                reason if table.table in reason else f"{table.table}: {reason}"
            )
    return {
        name: "; ".join(reasons) or "no target table of the merge job's result holds it; see the job log"
        for name, reasons in errors.items()
    }


class TablesNotMergedError(AirflowException):
    """The merge job failed for some target tables (the message names them and why); the others committed."""


APPLIED_RANGES_XCOM_KEY = "applied_lsn_ranges"
#: XCom key of the window descriptions the merge took from its extract tasks (for the watermark commit)
MERGED_WINDOWS_XCOM_KEY = "merged_windows"


class CdcSparkMergeOperator(TargetTablesOperator, PostgresTargetOperator, SparkJobOperator):
    """
    Merge CDC windows into Apache Iceberg tables with the provider's Spark job.

    Each target table commits on its own: when some fail, the others commit and the task fails naming
    the failed tables, after pushing ``applied_lsn_ranges`` and ``merged_windows`` of the committed
    tables only (the watermark commit, ``all_done``, advances those in the same run); a retry merges
    only what is not applied yet and pushes them again. A failed task leaves a failure record
    (``operators.failure_record``: the failed tables' capture instances and errors) for ``run_outcome``.
    The job writes what it did as a result file on the staging storage
    (``{result_path}/_merge_results/…json``, read and then removed by the task; any deploy mode), kept
    as ``merge_result`` (``MergeResult``: per target table its applied windows and LSN ranges, rows by
    operation, snapshot id and seconds). Besides the manifest URIs it returns, it pushes the XCom
    ``applied_lsn_ranges``: capture instance -> the LSN ranges its table holds after the merge, read
    from the table itself, which WatermarkCommitOperator mirrors into the watermark Variables, and
    ``merged_windows``: the window descriptions it took from the extract tasks (those whose task failed
    left none), which the watermark commit takes so that it depends on the merge alone.

    A :class:`SparkJobOperator` (Spark settings, ``ship_job_modules``) whose application is
    ``merge_job.py`` and whose arguments come from the extract task's XCom; the target tables are
    named as :class:`TargetTablesOperator` says (``namespace``, ``table_name_template``, ``targets``).

    :param extract_task_ids: task id(s) of the extract task(s) whose XCom lists the windows.
    :param skip_without_windows: when the extract tasks left no window (all failed or had nothing to
        do), skip instead of failing: for a merge that runs whatever its upstream tasks' states
        (trigger rule ``all_done``), as the pipeline's does.
    :param windows: the windows instead of an XCom pull: manifest URI(s), window dict(s) as the
        extract task returns them, or a list of these. (templated)
    :param delete_mode: ``soft`` (default) or ``hard``.
    :param write_mode: ``merge-on-read`` (default) or ``copy-on-write``, set on table creation.
    :param table_properties: further Iceberg table properties set on table creation. (templated)
    :param target_kind: ``iceberg`` (default) or ``postgres``: tables ``namespace.table`` of a PostgreSQL
        database (``namespace`` is then the schema; docs/targets-postgres.md). Spark needs the JDBC
        driver in ``jars`` (Debian: ``/usr/share/java/postgresql.jar``).
    :param target_conn_id: for ``postgres``, the Airflow connection (type ``postgres``) of the target
        database: the job gets the URL as an argument and the login in a private file (mode 600) on
        this worker, removed when the task ends (client deploy mode), never on the command line or in
        spark-submit's environment. (templated)
    :param jdbc_url: for ``postgres`` instead of a connection: the URL, with ``jdbc_credentials_file``.
    :param jdbc_credentials_file: a file (mode 600, ``user=`` / ``password=`` lines) where the Spark
        driver runs, for cluster deploy mode, where a file on this worker does not reach it.
    :param jdbc_connections: connections that load each batch into the target at once.
    :param partition_buckets: ``bucket(N, first key column)`` partitioning of the tables the job
        creates, for the storage-partitioned MERGE; ``auto``: N from their size; 0 (default):
        unpartitioned. Existing tables keep their spec (docs/merge-performance.md). (templated)
    :param concurrent_tables: target tables the job merges at once, each in its own Spark session
        and fair-scheduler pool; 1 (default): one after another. (templated)
    :param merge_strategy: Iceberg: ``auto`` (default; per change window, a MERGE or one rewrite of
        the table with the window applied, from the table's file statistics), ``merge`` or
        ``rewrite`` (docs/merge-performance.md). Checked when the task runs. (templated)
    :param table_modes: capture instance -> what its target table holds: ``current`` (default),
        ``history`` (every version, SCD type 2) or ``changelog`` (every change row); a capture
        instance without key columns is a change log (docs/history-targets.md). (templated)
    :param result_path: the staging path under which the job writes its result file, reachable by
        the Spark driver and this task; default the windows' own staging path (the directory above
        their capture instances'). (templated)
    """

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "namespace",
        "windows",
        "table_name_template",
        "targets",
        "table_properties",
        "target_conn_id",
        "jdbc_url",
        "partition_buckets",
        "concurrent_tables",
        "merge_strategy",
        "result_path",
        "table_modes",
    )
    job_path = MERGE_JOB_PATH
    job_name = "sqlserver-cdc-merge"

    def __init__(
        self,
        *,
        extract_task_ids: str | Sequence[str] | None = None,
        skip_without_windows: bool = False,
        windows: Any = None,
        delete_mode: str = DEFAULT_DELETE_MODE,
        write_mode: str = DEFAULT_WRITE_MODE,
        table_properties: Mapping[str, str] | None = None,
        target_kind: str = DEFAULT_TARGET_KIND,
        jdbc_credentials_file: str | None = None,
        jdbc_connections: int = DEFAULT_JDBC_CONNECTIONS,
        partition_buckets: int | str = DEFAULT_PARTITION_BUCKETS,
        concurrent_tables: int | str = DEFAULT_CONCURRENT_TABLES,
        merge_strategy: str = DEFAULT_MERGE_STRATEGY,
        result_path: str | None = None,
        table_modes: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # The Spark connection and deploy mode as given, to tell where the driver runs (client or cluster).
        self.conn_id: str = kwargs.get("conn_id") or SparkSubmitHook.default_conn_name
        self.deploy_mode: str | None = kwargs.get("deploy_mode")
        if windows is None and extract_task_ids is None:
            raise ValueError(f"{self.task_id}: pass extract_task_ids (the extract task) or windows")
        check_one_of("delete_mode", delete_mode, DELETE_MODES, task_id=self.task_id)
        check_one_of("write_mode", write_mode, WRITE_MODES, task_id=self.task_id)
        self.extract_task_ids = extract_task_ids
        self.skip_without_windows = skip_without_windows
        self.windows = windows
        self.delete_mode = delete_mode
        self.write_mode = write_mode
        self.table_properties = dict(table_properties or {})
        check_one_of("target_kind", target_kind, TARGET_KINDS, task_id=self.task_id)
        if target_kind == POSTGRES_TARGET and not (
            self.target_conn_id or (self.jdbc_url and jdbc_credentials_file)
        ):
            raise ValueError(
                f"{self.task_id}: target_kind {POSTGRES_TARGET!r} needs target_conn_id (an Airflow connection to the target "
                "database), or jdbc_url with jdbc_credentials_file"
            )
        if jdbc_connections < 1:
            raise ValueError(f"{self.task_id}: jdbc_connections must be at least 1, got {jdbc_connections}")
        self.target_kind = target_kind
        self.jdbc_credentials_file = jdbc_credentials_file
        self.jdbc_connections = jdbc_connections
        self.partition_buckets = partition_buckets
        self.concurrent_tables = concurrent_tables
        if not is_template(partition_buckets) and not is_template(concurrent_tables):
            try:
                scale_arguments(partition_buckets, concurrent_tables)
            except ValueError as err:
                raise ValueError(f"{self.task_id}: {err}") from None
        self.merge_strategy = merge_strategy
        self.result_path = result_path
        self.table_modes = dict(table_modes or {})
        self._jdbc_target: JdbcTarget | None = None
        self._login_file: Path | None = None
        self.merge_result: MergeResult | None = None
        self._windows: list[ChangeWindow] = []

    def _window_value(self, context: Context) -> Any:
        if self.windows is not None:
            return self.windows
        return context["ti"].xcom_pull(task_ids=self.extract_task_ids)

    def execute(self, context: Context) -> list[str]:
        """Resolve the windows, fill in the job's arguments and run spark-submit; return the manifest URIs.

        A failing task leaves a failure record (``operators.failure_record``, read by ``run_outcome``):
        the capture instances of the failed target tables with each table's error, or, when the job
        failed as a whole, those of every window it was given, with the task's error.
        """
        self._windows, self._jdbc_target, self.merge_result = [], None, None
        try:
            return self._execute(context)
        except AirflowSkipException:
            raise
        except Exception as err:
            self._record_failure(context, err)
            raise

    def _execute(self, context: Context) -> list[str]:
        value = self._window_value(context)
        manifests, windows = merge_inputs(value)
        self._windows = windows
        if not manifests and self.skip_without_windows:
            raise AirflowSkipException(f"{self.task_id}: the extract tasks left no window to merge")
        if not manifests:
            raise ValueError(
                f"{self.task_id}: no windows to merge (XCom of {self.extract_task_ids!r} is {value!r}); "
                "check that the extract task ran and returned its window description"
            )
        self._jdbc_target = self.connection_target() if self.target_kind == POSTGRES_TARGET else None
        url = self.target_url(self._jdbc_target)
        credentials_file = self.jdbc_credentials_file
        if self._jdbc_target is not None and not credentials_file:
            # The login goes to the driver as a private file on this worker, removed when the task ends.
            self._refuse_cluster_deploy_mode()
            self._login_file = write_login_file(self._jdbc_target)
            credentials_file = str(self._login_file)
        try:
            return self._merge(context, value, manifests, windows, url, credentials_file)
        finally:
            self._remove_login_file()

    def _merge(
        self,
        context: Context,
        value: Any,
        manifests: list[str],
        windows: list[ChangeWindow],
        url: str | None,
        credentials_file: str | None,
    ) -> list[str]:
        """Fill in the job's arguments, run spark-submit and take the job's result; return the manifest URIs."""
        result_uri = self._result_uri(context, manifests)
        arguments = merge_job_arguments(
            manifests,
            namespace=self.namespace,
            table_name_template=self.table_name_template,
            targets=self.targets,
            delete_mode=self.delete_mode,
            write_mode=self.write_mode,
            properties=self.table_properties,
            jdbc_url=url if self.target_kind == POSTGRES_TARGET else None,
            jdbc_connections=self.jdbc_connections,
            jdbc_credentials_file=credentials_file,
            partition_buckets=self.partition_buckets,
            concurrent_tables=self.concurrent_tables,
            merge_strategy=self.merge_strategy,
            result_uri=result_uri,
            table_modes=self.table_modes,
        )
        self.log.info("Merging %d window(s): %s", len(manifests), ", ".join(manifests))
        self.merge_result = None
        started = time.monotonic()
        try:
            self.submit_job(context, arguments)
        except AirflowException as err:
            self.merge_result = self._take_result(result_uri, failed=True)
            message = failed_tables_message(self.task_id, self.merge_result) if self.merge_result else None
            if message is None:
                raise
            # One table's trouble stays its own: the committed tables' watermarks advance in this run.
            self._push_committed_windows(context, windows, self.merge_result)
            raise TablesNotMergedError(message) from err
        self.merge_result = self._take_result(result_uri, failed=False)
        ranges = self.merge_result.applied_lsn_ranges() if self.merge_result is not None else None
        context["ti"].xcom_push(key=APPLIED_RANGES_XCOM_KEY, value=ranges)
        # Asset events per target table and metrics (merge_outputs.py, docs/assets.md)
        self.asset_extras = record_merge_outputs(
            context,
            window_value=value,
            result=self.merge_result.summary() if self.merge_result is not None else None,
            outlets=self.outlets,
            namespace=self.namespace,
            table_name_template=self.table_name_template,
            targets=self.targets,
            seconds=time.monotonic() - started,
            log=self.log,
            target_kind=self.target_kind,
            jdbc_url=url if self.target_kind == POSTGRES_TARGET else None,
        )
        # The windows as found (failed extracts left none): what WatermarkCommitOperator commits.
        context["ti"].xcom_push(key=MERGED_WINDOWS_XCOM_KEY, value=[w.to_xcom() for w in windows])
        return manifests

    def _push_committed_windows(
        self, context: Context, windows: Sequence[ChangeWindow], result: MergeResult
    ) -> None:
        """Push the XComs of a partly failed merge: the committed tables' ranges and windows only."""
        committed = committed_windows(windows, result)
        left = uncommitted_instances(windows, committed)
        context["ti"].xcom_push(key=APPLIED_RANGES_XCOM_KEY, value=result.applied_lsn_ranges())
        context["ti"].xcom_push(key=MERGED_WINDOWS_XCOM_KEY, value=[w.to_xcom() for w in committed])
        self.log.info(
            "Watermarks to commit for the committed tables' capture instances: %s; not for %s",
            ", ".join(dict.fromkeys(w.capture_instance for w in committed)) or "none",
            ", ".join(left) or "none",
        )

    def _record_failure(self, context: Context, err: Exception) -> None:
        """Record the failure: the failed tables' capture instances and errors, else every window's."""
        result = self.merge_result
        errors = (
            failed_instance_errors(self._windows, result) if result is not None and result.failed() else {}
        )
        names = list(errors) or list(dict.fromkeys(w.capture_instance for w in self._windows))
        password = self._jdbc_target.password if self._jdbc_target is not None else ""
        record_failure(context, names, err, errors=errors, kind=MERGE_FAILURE, secrets=[password])

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage of the merge: source tables in, target tables out (lineage.py; OpenLineage provider only)."""
        from airflow_provider_sqlserver_cdc.lineage import merge_lineage

        return merge_lineage(getattr(self, "asset_extras", {}))

    def _result_uri(self, context: Context, manifests: Sequence[str]) -> str:
        """Return a new result file URI for this try: under ``result_path``, named after the task instance."""
        ti = context["ti"]
        names = [str(getattr(ti, name, "") or "") for name in ("dag_id", "task_id", "run_id")]
        try_number = getattr(ti, "try_number", None)
        try:
            base = self.result_path or window_base(manifests[0])
        except ResultFileError as err:
            raise ValueError(f"{self.task_id}: {err}") from None
        return result_file_uri(base, *names, f"try{try_number}" if try_number is not None else "")

    def _take_result(self, uri: str, *, failed: bool) -> MergeResult | None:
        """Read the job's result file, then remove it; None (with a warning) when there is none to read."""
        try:
            text = read_text(uri)
        except OSError as err:
            self.log.warning("Could not read the merge result file %s: %s", uri, err)
            return None
        if text is None:
            if not failed:  # a job that stopped before merging writes none; its own error says why
                self.log.warning(
                    "The merge job wrote no result file %s (is the job on the cluster an older version of "
                    "the provider?); the watermarks follow the windows' ends",
                    uri,
                )
            return None
        result = MergeResult.from_json(text, uri)
        try:
            remove(uri)
        except OSError as err:
            self.log.warning("Could not remove the merge result file %s: %s", uri, err)
        for table in result.tables.values():
            self.log.info(
                "%s: %s, windows %s, rows %s, snapshot %s, %.1f s",
                table.table,
                table.status,
                ", ".join(table.applied) or "none",
                table.rows,
                table.snapshot_id,
                table.seconds or 0.0,
            )
        return result

    def on_kill(self) -> None:
        """Stop spark-submit, then remove the login file at once (the task's process may not get further)."""
        try:
            super().on_kill()
        finally:
            self._remove_login_file()

    def _remove_login_file(self) -> None:
        remove_login_file(self._login_file)
        self._login_file = None

    def _refuse_cluster_deploy_mode(self) -> None:
        """Fail before spark-submit when the driver runs in cluster deploy mode: a file here does not reach it."""
        mode = self.deploy_mode
        if not mode:
            try:
                mode = BaseHook.get_connection(self.conn_id).extra_dejson.get("deploy-mode")
            except AirflowNotFoundException:
                mode = None  # SparkSubmitHook's default then: no deploy mode, the driver runs here
        if mode == "cluster":
            raise AirflowException(
                f"{self.task_id}: the JDBC target's login (connection {self.target_conn_id!r}) reaches the Spark "
                "driver as a private file on this worker, which a driver in cluster deploy mode cannot read. Use "
                "deploy mode client, or pass jdbc_url and jdbc_credentials_file (a mode-600 file where the "
                "driver runs)"
            )
