"""Commit-to-queryable latency from the windows' commit times and the target's snapshot summaries (no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.testing import replication_latency as latency


def test_each_transaction_is_queryable_from_the_first_snapshot_holding_its_lsn(tmp_path: Path) -> None:
    staging, warehouse = tmp_path / "staging", tmp_path / "warehouse"
    log = ChangeLog()
    rows = flatten([log.insert(id=1, name="a", amount=None), log.insert(id=2, name="b", amount=None)])
    write_window(staging, WindowSpec("dbo_orders", 0x100, log.lsn, rows))
    found = latency.transactions(latency.window_manifests(staging))
    assert len(found) == 2  # one per commit LSN
    first, second = sorted(found, key=lambda t: t.lsn)
    metadata = warehouse / "cdc" / "dbo_orders" / "metadata"
    metadata.mkdir(parents=True)
    (metadata / "version-hint.text").write_text("3")

    def snapshot(at: dt.datetime, last: int) -> dict:
        ranges = f"0x{0x100:020X}-0x{last:020X}"
        return {
            "timestamp-ms": int(at.timestamp() * 1000),
            "summary": {latency.RANGES_KEY + "dbo_orders": ranges},
        }

    committed = first.committed
    history = [
        snapshot(committed + dt.timedelta(seconds=5), first.lsn),
        snapshot(committed + dt.timedelta(seconds=9), second.lsn),
    ]
    (metadata / "v3.metadata.json").write_text(
        json.dumps({"snapshots": [*history, {"timestamp-ms": 0, "summary": {}}]})
    )
    directories = latency.table_directories(staging, warehouse, "lake.cdc")
    assert directories == {"dbo_orders": warehouse / "cdc" / "dbo_orders"}
    values = latency.latencies([first, second], latency.histories(directories))
    assert values[0] == 5.0
    assert values[1] == (committed + dt.timedelta(seconds=9) - second.committed).total_seconds()
    assert latency.describe([5.0, 7.0, None]).startswith("commit-to-queryable p50 6.0 s p95 7.0 s max 7.0 s")
    assert latency.describe([5.0, 7.0, None]).endswith("1 not queryable yet")
