"""CDC state survives a restart of a simulator that keeps its state in a data directory (``--data``)."""

from __future__ import annotations

from pathlib import Path

from sqlserver_cdc_simulator.cdc.registration import (
    capture_job_running,
    run_capture_scan,
)
from sqlserver_cdc_simulator.engine import Engine


def _all_changes(engine: Engine) -> list[tuple]:
    return engine.execute(
        "DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'dbo_t'), @t binary(10) = sys.fn_cdc_get_max_lsn(); "
        "SELECT __$start_lsn, __$operation, id, v FROM cdc.fn_cdc_get_all_changes_dbo_t(@f, @t, N'all')",
        database="shop",
    )[0]


def test_capture_instances_change_rows_and_job_survive_a_restart(tmp_path: Path):
    engine = Engine("pw", data_dir=str(tmp_path))
    engine.execute("CREATE DATABASE shop")
    engine.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(10) NULL)", database="shop")
    engine.execute("EXEC sys.sp_cdc_enable_db", database="shop")
    engine.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL",
        database="shop",
    )
    engine.execute("INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b')", database="shop")
    run_capture_scan(engine, "shop")
    before = _all_changes(engine)
    max_before = engine.execute("SELECT sys.fn_cdc_get_max_lsn()", database="shop")[0][0][0]
    engine.close()

    restarted = Engine("pw", data_dir=str(tmp_path))
    try:
        assert _all_changes(restarted) == before
        assert capture_job_running(restarted, "shop")  # started again at the first CDC access
        restarted.execute("UPDATE dbo.t SET v = N'c' WHERE id = 1", database="shop")
        run_capture_scan(restarted, "shop")
        after = _all_changes(restarted)
        assert after[: len(before)] == before
        assert [(r[1], r[2], r[3]) for r in after[len(before) :]] == [(4, 1, "c")]
        assert after[-1][0] > max_before
        tables = restarted.execute("SELECT name FROM sys.tables WHERE name = 'dbo_t_CT'", database="shop")[0]
        assert tables == [("dbo_t_CT",)]
    finally:
        restarted.registry.stop_cdc_jobs()
        restarted.close()
