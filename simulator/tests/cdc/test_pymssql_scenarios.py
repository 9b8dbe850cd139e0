"""The CDC objects through pymssql (what Airflow's MsSqlHook uses): plain batches, client-side parameters."""

from __future__ import annotations

import pymssql
import pytest


def test_enable_capture_and_query_with_pymssql(sqlserver_simulator):
    conn = sqlserver_simulator.pymssql_connect(autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute("CREATE DATABASE cdc_pymssql")
        cursor.execute("USE cdc_pymssql")
        cursor.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL)")
        cursor.execute("EXEC sys.sp_cdc_enable_db")
        cursor.execute(
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL"
        )
        cursor.execute("INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b')")
        cursor.execute("UPDATE dbo.t SET v = N'c' WHERE id = 2")
        sqlserver_simulator.run_capture_scan("cdc_pymssql")
        cursor.execute("SELECT sys.fn_cdc_get_min_lsn(%s), sys.fn_cdc_get_max_lsn()", ("dbo_t",))
        low, high = cursor.fetchone()
        assert len(low) == 10 and high > low
        # pymssql writes the bytes into the batch as 0x... literals
        cursor.execute(
            "SELECT __$operation, id, v FROM cdc.fn_cdc_get_all_changes_dbo_t(%s, %s, N'all update old')",
            (low, high),
        )
        assert cursor.fetchall() == [(2, 1, "a"), (2, 2, "b"), (3, 2, "b"), (4, 2, "c")]
        with pytest.raises(pymssql.OperationalError) as excinfo:
            cursor.execute("SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_t(%s, %s, N'all')", (high, low))
        assert excinfo.value.args[0] == 313
    finally:
        conn.close()
