"""
Snapshot + change windows merged by the real Spark merge job into Iceberg equal the source (simulator).

Also: re-snapshotting one table later (after deletes) replaces that table's contents and leaves
the other tables alone.
"""

from __future__ import annotations

import pytest
from snapshot_source import ConcurrentWriter, interrupted_snapshot, seed, windows_after

from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.testing.table_comparison import (
    compare_table,
    describe_all,
    target_table_name,
)

pytestmark = pytest.mark.spark

CATALOG = "snaplake"
NAMESPACE = f"{CATALOG}.cdc"


def assert_replicated(comparisons) -> None:
    """Every table matches its source: same keys, no schema difference, equal values."""
    for comparison in comparisons:
        detail = describe_all(comparisons)
        assert not comparison.schema_differences, detail
        assert not comparison.missing_in_target and not comparison.unexpected_in_target, detail
        assert comparison.source_rows == comparison.target_rows, detail
        assert not comparison.value_differences, detail


def merge(spark, manifests: list[str]) -> None:
    args = [item for uri in manifests for item in ("--manifest", uri)]
    run(spark, parse_args([*args, "--namespace", NAMESPACE]))


def test_snapshots_and_windows_merged_with_spark_equal_the_source(source, spark, tmp_path):
    workload = seed(source, rows=80)
    hook = source.hook()
    instances = [hook.get_capture_instance(t.capture_instance) for t in source.sample.tables]
    staging = tmp_path / "staging"
    snapshots = {}
    with ConcurrentWriter(source, workload) as writer:
        writer.wait_for_commits(2)

        # dbo.order_lines: a snapshot that fails after two chunks and is resumed (same LSN, later reads)
        lines = next(i for i in instances if i.name == "dbo_order_lines")
        interrupted_snapshot(
            hook,
            lines,
            staging,
            source.name,
            chunk_rows=30,
            after_chunks=2,
            each_chunk=lambda progress: writer.wait_for_commits(2),
        )
        for instance in instances:
            snapshots[instance.name] = snapshot_capture_instance(
                hook,
                instance,
                output=WindowOutput(str(staging), source.name),
                chunk_rows=30,
                on_chunk=lambda progress: writer.wait_for_commits(2),
            )
    assert writer.error is None, writer.error
    assert snapshots["dbo_order_lines"].resumed_chunks == 2
    source.capture()
    manifests = []
    for instance in instances:
        result = snapshots[instance.name]
        manifests.append(result.extract.manifest_uri)
        lsn = Lsn.from_hex(result.progress.snapshot_lsn)
        manifests += [
            str(w / "_manifest.json") for w in windows_after(hook, instance, lsn, staging, source.name)
        ]
    merge(spark, manifests)
    conn = source.connect()
    comparisons = [compare_table(spark, conn, i, target_table_name(i, NAMESPACE)) for i in instances]
    assert_replicated(comparisons)

    # Re-snapshot dbo_orders only, after deletes the windows of dbo_orders are NOT given to the
    # merge: the baseline alone must remove the deleted rows. The other tables get their windows.
    conn.cursor().execute("DELETE FROM dbo.orders WHERE order_id % 3 = 0")
    workload.load_model(conn)
    workload.run(conn, transactions=30)
    source.capture()
    orders = next(i for i in instances if i.name == "dbo_orders")
    again = snapshot_capture_instance(
        hook, orders, output=WindowOutput(str(staging), source.name), chunk_rows=30
    )
    source.capture()
    later = [again.extract.manifest_uri]
    for instance in instances:
        if instance.name == "dbo_orders":
            continue
        after = snapshots[instance.name].progress.snapshot_lsn
        # the windows after the first snapshot, extracted again up to now: merged windows are skipped by position
        later += [
            str(w / "_manifest.json")
            for w in windows_after(hook, instance, Lsn.from_hex(after), tmp_path / "later", source.name)
        ]
    merge(spark, later)
    source.capture()
    late_windows = windows_after(
        hook, orders, Lsn.from_hex(again.progress.snapshot_lsn), tmp_path / "orders-after", source.name
    )
    merge(spark, [str(w / "_manifest.json") for w in late_windows])
    comparisons = [compare_table(spark, conn, i, target_table_name(i, NAMESPACE)) for i in instances]
    conn.close()
    assert_replicated(comparisons)
