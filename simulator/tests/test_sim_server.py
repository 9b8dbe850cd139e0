"""The simulator's own behaviour: login, protocol details, clock, the fixture and the command line."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymssql
import pyodbc
import pytest

from sqlserver_cdc_simulator.connections import odbc_connection_string


def _connect_as(sim: Any, user: str, password: str, database: str | None = None) -> pyodbc.Connection:
    """A pyodbc connection to the simulator as another login than ``sa``."""
    odbc = odbc_connection_string(
        host=sim.host, port=sim.port, database=database, user=user, password=password
    )
    return pyodbc.connect(odbc, autocommit=True)


def test_fixture_serves_fresh_state_quickly(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    names = {r[0] for r in conn.execute("SELECT name FROM sys.databases").fetchall()}
    assert names == {"master", "tempdb", "model", "msdb"}
    conn.execute("CREATE DATABASE leftover")
    conn.close()
    started = time.perf_counter()
    sqlserver_simulator.reset()
    assert time.perf_counter() - started < 2.0
    conn = sqlserver_simulator.connect()
    assert conn.execute("SELECT COUNT(*) FROM sys.databases WHERE name = 'leftover'").fetchone()[0] == 0


def test_wrong_password_is_login_failed_18456(sqlserver_simulator: Any) -> None:
    bad = sqlserver_simulator.odbc_connection_string().replace(sqlserver_simulator.password, "wrong")
    with pytest.raises(pyodbc.Error) as err:
        pyodbc.connect(bad, timeout=5)
    assert "Login failed for user 'sa'" in str(err.value)
    with pytest.raises(pymssql.Error) as err2:
        pymssql.connect(
            server=sqlserver_simulator.host, port=str(sqlserver_simulator.port), user="sa", password="wrong"
        )
    assert "18456" in str(err2.value)


def test_created_login_can_connect_and_role_membership_is_visible(sqlserver_simulator: Any) -> None:
    admin = sqlserver_simulator.connect()
    admin.execute("CREATE DATABASE app")
    admin.execute("CREATE LOGIN reader WITH PASSWORD = 'Read-Only-1!'")
    admin.execute("USE app")
    admin.execute("CREATE USER reader FOR LOGIN reader")
    admin.execute("CREATE ROLE cdc_readers")
    admin.execute("ALTER ROLE cdc_readers ADD MEMBER reader")
    conn = _connect_as(sqlserver_simulator, "reader", "Read-Only-1!", database="app")
    assert tuple(
        conn.execute(
            "SELECT SUSER_SNAME(), USER_NAME(), IS_MEMBER('cdc_readers'), IS_MEMBER('db_owner')"
        ).fetchone()
    ) == (
        "reader",
        "reader",
        1,
        0,
    )


def test_server_variables_and_properties(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    version, spid, trancount, db = conn.execute("SELECT @@VERSION, @@SPID, @@TRANCOUNT, DB_NAME()").fetchone()
    assert version.startswith("Microsoft SQL Server 2022")
    assert spid >= 51 and trancount == 0 and db == "master"
    assert (
        conn.execute("SELECT CAST(SERVERPROPERTY('ProductVersion') AS varchar(20))")
        .fetchone()[0]
        .startswith("16.")
    )


def test_clock_controls_server_time_in_its_time_zone(sqlserver_simulator: Any) -> None:
    clock = sqlserver_simulator.clock
    clock.set_timezone("Europe/Berlin")
    clock.set(dt.datetime(2024, 7, 1, 12, 0, 0), frozen=True)
    conn = sqlserver_simulator.connect()
    row = tuple(
        conn.execute(
            "SELECT CONVERT(varchar(40), SYSDATETIMEOFFSET(), 121), DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), "
            "CONVERT(varchar(30), SYSUTCDATETIME(), 121), CONVERT(varchar(30), GETDATE(), 121)"
        ).fetchone()
    )
    assert row == (
        "2024-07-01 12:00:00.0000000 +02:00",
        120,
        "2024-07-01 10:00:00.0000000",
        "2024-07-01 12:00:00.000",
    )
    clock.advance(dt.timedelta(days=200))
    offset = tuple(
        conn.execute(
            "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), CONVERT(varchar(19), GETDATE(), 120)"
        ).fetchone()
    )
    assert offset == (60, "2025-01-17 11:00:00")  # 200 days of elapsed time: 10:00 UTC is 11:00 in winter


def test_multiple_statements_and_result_sets_in_one_batch(sqlserver_simulator: Any) -> None:
    cur = sqlserver_simulator.connect().cursor()
    cur.execute("SET NOCOUNT ON; DECLARE @x int = 41; SELECT @x + 1 AS a; SELECT N'two' AS b, 3 AS c")
    assert cur.fetchall()[0][0] == 42
    assert cur.nextset()
    assert tuple(cur.fetchone()) == ("two", 3)
    assert not cur.nextset()


def _create_8192_wide_rows(conn: Any, database: str, pad_type: str, pad: str) -> None:
    """
    Create ``database`` with ``dbo.n (i, pad)`` holding 2**13 rows, far more than one TDS packet; stay in it.

    :param conn: a connection to the simulator.
    :param database: the database to create.
    :param pad_type: the type of the ``pad`` column.
    :param pad: the T-SQL expression of the first row's ``pad`` (copied to every row).
    """
    conn.execute(f"CREATE DATABASE {database}")
    conn.execute(f"USE {database}")
    conn.execute(f"CREATE TABLE dbo.n (i int PRIMARY KEY, pad {pad_type})")
    conn.execute(f"INSERT INTO dbo.n VALUES (1, {pad})")
    for k in range(1, 14):
        conn.execute(f"INSERT INTO dbo.n SELECT i + {2 ** (k - 1)}, pad FROM dbo.n")


def test_abandoned_result_is_cancelled_and_connection_stays_usable(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    _create_8192_wide_rows(conn, "big", "nchar(200)", "N'x'")
    cur = conn.cursor()
    cur.execute("SELECT i, pad FROM dbo.n")
    assert cur.fetchone() is not None
    cur.close()  # abandons ~8,000 unread rows: the driver sends ATTENTION
    assert conn.execute("SELECT COUNT(*) FROM dbo.n").fetchone()[0] == 2**13


def test_unsupported_statement_fails_with_a_clear_error(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    with pytest.raises(pyodbc.Error) as err:
        conn.execute("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE;")
    assert "does not support MERGE statements" in str(err.value)
    with pytest.raises(pyodbc.Error) as err:
        conn.execute("SELECT LAG(name) OVER (ORDER BY name) FROM sys.databases")
    assert "does not support the window function LAG" in str(err.value)


def test_sp_executesql_and_prepared_statements(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    row = conn.execute("EXEC sp_executesql N'SELECT @a + @b', N'@a int, @b int', @a = 1, @b = 2").fetchone()
    assert row[0] == 3
    cur = conn.cursor()
    for i in range(3):  # sp_prepexec, then sp_unprepare + sp_prepexec
        assert cur.execute("SELECT ? * 2", i).fetchone()[0] == i * 2
    assert cur.execute("SELECT CAST(? AS varbinary(10))", b"\x00\x01").fetchone()[0] == b"\x00\x01"


def test_engine_execute_and_transaction_log_records_lsns(sqlserver_simulator: Any) -> None:
    from sqlserver_cdc_simulator.log import lsn_from_numeric, lsn_to_numeric

    engine = sqlserver_simulator.engine
    engine.execute("CREATE DATABASE logdb")
    engine.execute("CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(10))", database="logdb")
    engine.execute(
        "BEGIN TRAN; INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b'); UPDATE dbo.t SET v = N'z' WHERE id = 1; COMMIT",
        database="logdb",
    )
    engine.execute("BEGIN TRAN; DELETE FROM dbo.t WHERE id = 2; ROLLBACK", database="logdb")
    log = engine.database("logdb").log
    xacts = list(log.scan())
    assert [x.operations[0].kind for x in xacts] == ["create_table", "insert"]
    row_xact = xacts[1]
    ops = row_xact.operations
    assert [op.kind for op in ops] == ["insert", "insert", "update"]
    assert ops[2].before_row == {"id": 1, "v": "a"} and ops[2].after_row == {"id": 1, "v": "z"}
    lsns = [row_xact.begin_lsn] + [op.lsn for op in ops] + [row_xact.commit_lsn]
    assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    assert all(len(x) == 10 for x in lsns)
    assert xacts[0].commit_lsn < row_xact.begin_lsn
    assert list(log.scan(after_lsn=xacts[0].commit_lsn)) == [row_xact]
    assert lsn_from_numeric(lsn_to_numeric(row_xact.commit_lsn)) == row_xact.commit_lsn
    outside = log.allocate_lsn()
    assert outside > row_xact.commit_lsn


def test_begin_lsn_is_visible_in_dm_tran_database_transactions(sqlserver_simulator: Any) -> None:
    from sqlserver_cdc_simulator.log import lsn_to_numeric

    conn = sqlserver_simulator.connect(autocommit=False)
    conn.execute("CREATE DATABASE dm")
    conn.commit()
    conn.execute("USE dm")
    conn.execute("CREATE TABLE dbo.t (id int)")
    conn.commit()
    conn.execute("INSERT INTO dbo.t VALUES (1)")
    begin = conn.execute(
        "SELECT database_transaction_begin_lsn FROM sys.dm_tran_database_transactions "
        "WHERE transaction_id = CURRENT_TRANSACTION_ID() AND database_id = DB_ID()"
    ).fetchone()[0]
    conn.commit()
    committed = list(sqlserver_simulator.engine.database("dm").log.scan())[-1]
    assert int(begin) == lsn_to_numeric(committed.begin_lsn)


def test_extension_registry_procedures_functions_and_views(sqlserver_simulator: Any) -> None:
    from sqlserver_cdc_simulator import types as T
    from sqlserver_cdc_simulator.errors import SqlError
    from sqlserver_cdc_simulator.extensions import (
        ProcedureResult,
        ResultColumn,
        Rowset,
    )

    reg = sqlserver_simulator.engine.registry
    calls = []

    def proc(session: Any, args: Any) -> ProcedureResult:
        calls.append((args.get("name", 0), args.get("n", 1)))
        if args.get("n", 1) == 0:
            raise SqlError(22832, 16, 1, "Could not update the metadata.")
        return ProcedureResult([Rowset([ResultColumn("echo", T.nvarchar(20))], [(args.get("name", 0),)])])

    reg.procedure("sys.sp_test_echo", proc)
    reg.procedure(
        "sys.sp_test_out", lambda session, args: ProcedureResult(outputs={"doubled": args.get("v") * 2})
    )
    reg.scalar_function("sys.fn_test_double", lambda session, args: args[0].value * 2, T.INT)
    reg.table_function_prefix(
        "cdc.fn_test_rows_",
        lambda session, suffix, args: Rowset(
            [ResultColumn("s", T.nvarchar(50)), ResultColumn("n", T.INT)], [(suffix, args[0].value)]
        ),
    )
    try:
        conn = sqlserver_simulator.connect()
        assert conn.execute("EXEC sys.sp_test_echo @name = N'hi', @n = 2").fetchone()[0] == "hi"
        assert conn.execute("EXEC sp_test_echo N'pos', 3").fetchone()[0] == "pos"
        assert calls == [("hi", 2), ("pos", 3)]
        with pytest.raises(pyodbc.Error) as err:
            conn.execute("EXEC sys.sp_test_echo @name = N'x', @n = 0")
        assert "(22832)" in str(err.value)
        assert conn.execute("SELECT sys.fn_test_double(?)", 21).fetchone()[0] == 42
        out = conn.execute(
            "DECLARE @d int; EXEC sys.sp_test_out @v = 5, @doubled = @d OUTPUT; SELECT @d"
        ).fetchone()
        assert out[0] == 10
        assert tuple(conn.execute("SELECT s, n FROM cdc.fn_test_rows_dbo_Orders(7)").fetchone()) == (
            "dbo_Orders",
            7,
        )
    finally:
        del reg.procedures["sys.sp_test_echo"]
        del reg.procedures["sys.sp_test_out"]
        del reg.scalar_functions["sys.fn_test_double"]
        reg.table_prefixes[:] = [p for p in reg.table_prefixes if p[0] != "cdc.fn_test_rows_"]


def _start_cli(
    data: Path | None,
    password: str | None,
    *,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], str, str]:
    """Start the command line (``--password`` when *password* is given) and wait for its READY line."""
    command = [sys.executable, "-m", "sqlserver_cdc_simulator", "--port", "0"]
    if data is not None:
        command += ["--data", str(data)]
    if password is not None:
        command += ["--password", password]
    proc = subprocess.Popen(
        command + (extra or []),
        stdout=subprocess.PIPE,
        text=True,
        env=_cli_env(env or {}),
    )
    line = proc.stdout.readline()
    assert line.startswith("READY 127.0.0.1:"), line
    host, port = line.split()[1].rsplit(":", 1)
    return proc, host, port


def _cli_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SQLSERVER_SIMULATOR_PASSWORD"}
    env.update(extra)
    return env


def _login_works(host: str, port: str, password: str) -> bool:
    odbc = odbc_connection_string(host=host, port=int(port), user="sa", password=password)
    try:
        conn = pyodbc.connect(odbc, autocommit=True, timeout=10)
    except pyodbc.Error as e:
        assert "18456" in str(e), e
        return False
    try:
        return conn.execute("SELECT SUSER_SNAME()").fetchone()[0] == "sa"
    finally:
        conn.close()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0


@pytest.mark.parametrize(
    ("extra", "env"),
    [
        pytest.param([], {"SQLSERVER_SIMULATOR_PASSWORD": "Env-Pw-1!"}, id="default-variable"),
        pytest.param(["--password-env", "MY_SA_PW"], {"MY_SA_PW": "Env-Pw-1!"}, id="password-env"),
        pytest.param(
            ["--password-env", "MY_SA_PW"],
            {"MY_SA_PW": "Env-Pw-1!", "SQLSERVER_SIMULATOR_PASSWORD": "Other-Pw-2!"},
            id="password-env-wins-over-default",
        ),
    ],
)
def test_command_line_reads_the_sa_password_from_the_environment(
    extra: list[str], env: dict[str, str]
) -> None:
    proc, host, port = _start_cli(None, None, extra=extra, env=env)
    try:
        command_line = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"Env-Pw-1!" not in command_line  # what ps shows every user
        assert _login_works(host, port, "Env-Pw-1!")
        assert not _login_works(host, port, "Other-Pw-2!")
    finally:
        _stop(proc)


def test_command_line_password_option_still_works_and_wins() -> None:
    proc, host, port = _start_cli(None, "Argv-Pw-3!", env={"SQLSERVER_SIMULATOR_PASSWORD": "Env-Pw-1!"})
    try:
        assert _login_works(host, port, "Argv-Pw-3!")
        assert not _login_works(host, port, "Env-Pw-1!")
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        pytest.param(
            [],
            {},
            "no sa password: the environment variable SQLSERVER_SIMULATOR_PASSWORD is not set",
            id="nothing-given",
        ),
        pytest.param(
            [],
            {"SQLSERVER_SIMULATOR_PASSWORD": ""},
            "the environment variable SQLSERVER_SIMULATOR_PASSWORD is empty",
            id="default-empty",
        ),
        pytest.param(
            ["--password-env", "MY_SA_PW"],
            {"SQLSERVER_SIMULATOR_PASSWORD": "Env-Pw-1!"},
            "--password-env MY_SA_PW: the environment variable MY_SA_PW is not set",
            id="named-variable-unset",
        ),
        pytest.param(
            ["--password-env", ""],
            {},
            "--password-env needs the name of an environment variable",
            id="no-name",
        ),
        pytest.param(
            ["--password-env", "MY_SA_PW", "--password", "Argv-Pw-3!"],
            {"MY_SA_PW": "Env-Pw-1!"},
            "not allowed with argument",
            id="both-options",
        ),
    ],
)
def test_command_line_without_a_usable_password_exits_2_with_a_clear_message(
    extra: list[str], env: dict[str, str], message: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sqlserver_cdc_simulator", "--port", "0", *extra],
        capture_output=True,
        text=True,
        env=_cli_env(env),
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "Env-Pw-1!" not in result.stderr


def test_command_line_prints_ready_and_keeps_data_across_restarts(tmp_path: Path) -> None:
    password = "Cli-Pw-9!"
    proc, host, port = _start_cli(tmp_path, password)
    odbc = odbc_connection_string(host=host, port=int(port), user="sa", password=password)
    conn = pyodbc.connect(odbc, autocommit=True)
    conn.execute("CREATE DATABASE keep")
    conn.execute("USE keep")
    conn.execute("CREATE TABLE dbo.t (id int IDENTITY PRIMARY KEY, v nvarchar(10))")
    conn.execute("INSERT INTO dbo.t (v) VALUES (N'a'), (N'b')")
    conn.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert proc.stdout.read() == ""  # exactly one line on stdout

    proc, host, port = _start_cli(tmp_path, password)
    try:
        odbc = odbc_connection_string(
            host=host, port=int(port), database="keep", user="sa", password=password
        )
        conn = pyodbc.connect(odbc, autocommit=True)
        conn.execute("INSERT INTO dbo.t (v) VALUES (N'c')")
        assert [tuple(r) for r in conn.execute("SELECT id, v FROM dbo.t ORDER BY id").fetchall()] == [
            (1, "a"),
            (2, "b"),
            (3, "c"),
        ]
        conn.close()
    finally:
        proc.kill()  # no clean shutdown: the journal must carry the last insert
        proc.wait()
    proc, host, port = _start_cli(tmp_path, password)
    try:
        odbc = odbc_connection_string(
            host=host, port=int(port), database="keep", user="sa", password=password
        )
        conn = pyodbc.connect(odbc, autocommit=True)
        assert conn.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 3
        conn.close()
    finally:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(10) == 0


def test_cancelling_a_parameterised_stream_keeps_the_protocol_in_step(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    _create_8192_wide_rows(conn, "st", "nvarchar(400)", "REPLICATE(N'x', 400)")
    for _ in range(3):
        cur = conn.cursor()
        cur.execute("SELECT i, pad FROM dbo.n WHERE i > ?", 0)
        assert cur.fetchone() is not None
        cur.close()
        assert conn.execute("SELECT COUNT(*) FROM dbo.n WHERE i > ?", 8000).fetchone()[0] == 2**13 - 8000


def test_dm_views_need_view_server_state_for_logins_that_are_not_sysadmin(sqlserver_simulator: Any) -> None:
    admin = sqlserver_simulator.connect()
    admin.execute("CREATE LOGIN watcher WITH PASSWORD = 'W4tcher!pw'")
    conn = _connect_as(sqlserver_simulator, "watcher", "W4tcher!pw")
    query = "SELECT COUNT(*) FROM sys.dm_tran_database_transactions"
    with pytest.raises(pyodbc.Error) as err:
        conn.execute(query)
    assert "VIEW SERVER STATE permission was denied on object 'server', database 'master'. (300)" in str(
        err.value
    )
    assert (
        conn.execute("SELECT COUNT(*) FROM sys.dm_exec_sessions").fetchone()[0] == 1
    )  # its own session only
    admin.execute("GRANT VIEW SERVER PERFORMANCE STATE TO [watcher]")
    assert conn.execute(query).fetchone()[0] == 0
    admin.execute("REVOKE VIEW SERVER PERFORMANCE STATE FROM watcher")
    with pytest.raises(pyodbc.Error):
        conn.execute(query)
