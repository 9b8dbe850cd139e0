"""The PostgreSQL target with real Spark and a real PostgreSQL: idempotent, order-safe, atomic apply."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from window_builder import INT_KEY, ChangeLog, Column, WindowSpec, flatten, lsn_hex, write_window

from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError, TableMergeError
from airflow_provider_sqlserver_cdc.spark.merge.job import run as run_job
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    PASSWORD_ENV,
    USER_ENV,
    JdbcConnection,
    JdbcCredentials,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.postgres import PostgresTarget
from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer

pytestmark = pytest.mark.spark

EMAIL = Column("email", "varchar", pa.string(), max_length=50)
USERS_COLUMNS = (INT_KEY, EMAIL)


@pytest.fixture
def database(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh database of the test's own."""
    name = re.sub(r"\W", "_", request.node.name)[:40].lower()
    return postgres_server.create_database(f"{name}_{zlib.crc32(name.encode()):08x}")


@pytest.fixture
def merge(spark: Any, postgres_server: PostgresServer, database: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run the merge job into the test's database (login from the environment, as spark-submit passes it)."""
    monkeypatch.setenv(USER_ENV, postgres_server.user)
    monkeypatch.setenv(PASSWORD_ENV, postgres_server.password)

    def run(*manifests: str, target: PostgresTarget | None = None, **options: Any) -> dict[str, Any]:
        settings = MergeJobSettings(
            manifests=tuple(manifests),
            namespace="cdc",
            target_kind="postgres",
            jdbc_url=postgres_server.jdbc_url(database),
            **{"jdbc_connections": 3, **options},
        )
        return run_job(spark, settings, target)

    return run


def rows(server: PostgresServer, database: str, table: str = "cdc.dbo_users") -> dict[int, tuple]:
    """key -> (deleted, values...) of the target, without the position columns."""
    with server.connect(database) as conn:
        cursor = conn.execute(f"SELECT * FROM {table} ORDER BY id")
        names = [d.name for d in cursor.description]
        result = {}
        for record in cursor.fetchall():
            row = dict(zip(names, record, strict=True))
            values = [row[n] for n in names if not n.startswith("_cdc_") and n != "id"]
            result[row["id"]] = (row["_cdc_deleted"], *values)
        return result


def recorded_ranges(server: PostgresServer, database: str) -> dict[str, str]:
    with server.connect(database) as conn:
        found = conn.execute("SELECT to_regclass('cdc._cdc_applied_lsn_ranges') IS NOT NULL").fetchone()
        if not found[0]:
            return {}
        records = conn.execute(
            "SELECT capture_instance, applied_lsn_ranges FROM cdc._cdc_applied_lsn_ranges "
            "WHERE target_table = 'cdc.dbo_users'"
        ).fetchall()
        return dict(records)


def users_window(base: Path, start: int, log: ChangeLog, changes: list) -> str:
    return write_window(
        base, WindowSpec("dbo_users", start, log.lsn, flatten(changes), columns=USERS_COLUMNS)
    )


def three_windows(base: Path) -> tuple[str, str, str]:
    """Inserts; updates, a delete, a key update; a re-insert of the deleted key and another delete."""
    log = ChangeLog()
    w1 = users_window(base, 0x100, log, [log.insert(id=k, email=f"u{k}@x") for k in range(1, 7)])
    start = log.lsn + 1
    w2 = users_window(
        base,
        start,
        log,
        [
            log.update({"id": 2, "email": "u2@x"}, email="two@x"),
            log.delete(id=3, email="u3@x"),
            log.update({"id": 4, "email": "u4@x"}, id=40),
            log.insert(id=7, email="u7@x"),
        ],
    )
    start = log.lsn + 1
    w3 = users_window(
        base,
        start,
        log,
        [
            log.insert(id=3, email="again@x"),
            log.delete(id=5, email="u5@x"),
            log.update({"id": 7, "email": "u7@x"}, email="seven@x"),
        ],
    )
    return w1, w2, w3


EXPECTED_AFTER_THREE = {
    1: (False, "u1@x"),
    2: (False, "two@x"),
    3: (False, "again@x"),
    4: (True, None),  # tombstones keep the key and position only
    5: (True, None),
    6: (False, "u6@x"),
    7: (False, "seven@x"),
    40: (False, "u4@x"),
}


@pytest.mark.parametrize("delete_mode", ["soft", "hard"])
def test_windows_out_of_order_and_replayed_give_the_source_state(
    merge: Any, base: Path, postgres_server: PostgresServer, database: str, delete_mode: str
) -> None:
    w1, w2, w3 = three_windows(base)
    # The newest window first: key 3 is re-inserted (w3) before its delete (w2) comes, key 5 deleted (w3)
    # before its insert (w1) comes. Hard deletes too take this order: the deleted-key table remembers.
    merge(w3, delete_mode=delete_mode)
    merge(w1, delete_mode=delete_mode)  # older than w3: its changes to keys 3, 5 and 7 are not applied
    merge(w2, delete_mode=delete_mode)  # key 3's delete is older than its re-insert: the row stays
    expected = EXPECTED_AFTER_THREE
    if delete_mode == "hard":
        expected = {key: row for key, row in EXPECTED_AFTER_THREE.items() if not row[0]}
    assert rows(postgres_server, database) == expected
    assert recorded_ranges(postgres_server, database) == {"dbo_users": f"{lsn_hex(0x100)}-{lsn_hex(0x1D0)}"}
    # A replay the bookkeeping does not know of (as if delivered twice): the LSN guard alone keeps the rows.
    with postgres_server.connect(database) as conn:
        conn.execute("DELETE FROM cdc._cdc_applied_lsn_ranges")
    result = merge(w2, w1, w3, delete_mode=delete_mode)
    assert result["cdc.dbo_users"]["status"] == "committed"
    assert rows(postgres_server, database) == expected
    if delete_mode == "hard":
        with postgres_server.connect(database) as conn:
            deleted = conn.execute("SELECT id FROM cdc.dbo_users_cdc_deleted_keys ORDER BY id").fetchall()
        assert deleted == [(4,), (5,)]  # key 3's delete gave way to its newer re-insert
    with postgres_server.connect(database) as conn:
        types = dict(
            conn.execute(
                "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns c "
                "JOIN pg_attribute a ON a.attrelid = 'cdc.dbo_users'::regclass AND a.attname = c.column_name "
                "WHERE table_schema = 'cdc' AND table_name = 'dbo_users'"
            ).fetchall()
        )
        key = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'cdc.dbo_users'::regclass "
            "AND contype = 'p'"
        ).fetchone()[0]
        stages = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname LIKE '\\_cdc\\_stage\\_%'"
        ).fetchone()[0]
    assert types["email"] == "character varying(50)" and types["_cdc_start_lsn"] == "bytea"
    assert key == "PRIMARY KEY (id)"
    assert stages == 0


def test_unique_values_released_and_taken_in_one_window_apply_without_violation(
    merge: Any, base: Path, postgres_server: PostgresServer, database: str
) -> None:
    log = ChangeLog()
    w1 = users_window(base, 0x100, log, [log.insert(id=k, email=f"u{k}@x") for k in range(1, 41)])
    merge(w1)
    with postgres_server.connect(database) as conn:  # the user's unique index, not partial
        conn.execute("CREATE UNIQUE INDEX users_email ON cdc.dbo_users (email)")
    start = log.lsn + 1
    swaps = []
    for a in range(1, 21, 2):  # rows a and a+1 swap their emails through a temporary value
        b = a + 1
        swaps += [
            log.update({"id": a, "email": f"u{a}@x"}, email="tmp@x"),
            log.update({"id": b, "email": f"u{b}@x"}, email=f"u{a}@x"),
            log.update({"id": a, "email": "tmp@x"}, email=f"u{b}@x"),
        ]
    releases = [
        log.delete(id=30, email="u30@x"),
        log.insert(id=100, email="u30@x"),  # takes the value row 30 released (delete, then insert)
        log.update({"id": 31, "email": "u31@x"}, email="gone@x"),
        log.insert(id=101, email="u31@x"),  # takes the value row 31 released by an update
    ]
    merge(users_window(base, start, log, [*swaps, *releases]), jdbc_connections=4)
    after = rows(postgres_server, database)
    for a in range(1, 21, 2):
        assert after[a] == (False, f"u{a + 1}@x") and after[a + 1] == (False, f"u{a}@x")
    assert after[30] == (True, None) and after[100] == (False, "u30@x")
    assert after[31] == (False, "gone@x") and after[101] == (False, "u31@x")


def test_hard_deletes_keep_the_position_so_a_replayed_insert_cannot_resurrect(
    merge: Any, base: Path, postgres_server: PostgresServer, database: str
) -> None:
    log = ChangeLog()
    w1 = users_window(base, 0x100, log, [log.insert(id=k, email=f"u{k}@x") for k in (1, 2)])
    start = log.lsn + 1
    w2 = users_window(base, start, log, [log.delete(id=1, email="u1@x")])
    merge(w1, delete_mode="hard")
    merge(w2, delete_mode="hard")
    assert rows(postgres_server, database) == {2: (False, "u2@x")}
    with postgres_server.connect(database) as conn:
        conn.execute("DELETE FROM cdc._cdc_applied_lsn_ranges")  # the watermark is lost: w1 comes again
    merge(w1, delete_mode="hard")
    assert rows(postgres_server, database) == {2: (False, "u2@x")}
    with postgres_server.connect(database) as conn:
        deleted = conn.execute("SELECT id, _cdc_operation FROM cdc.dbo_users_cdc_deleted_keys").fetchall()
    assert deleted == [(1, 1)]


class StoppedBeforeCommit(PostgresTarget):
    """The target, stopped after every apply statement ran but before the commit (as a kill would)."""

    def _before_commit(self, conn: JdbcConnection) -> None:
        conn.close()  # the server rolls back a transaction whose connection is gone
        raise KeyboardInterrupt("killed mid-apply")


def test_a_kill_mid_apply_changes_nothing_and_a_rerun_completes(
    spark: Any, merge: Any, base: Path, postgres_server: PostgresServer, database: str
) -> None:
    w1, w2, w3 = three_windows(base)
    merge(w1)
    before = rows(postgres_server, database)
    stopped = StoppedBeforeCommit(
        spark,
        postgres_server.jdbc_url(database),
        JdbcCredentials(postgres_server.user, postgres_server.password),
    )
    with pytest.raises((TableMergeError, KeyboardInterrupt)):
        merge(w2, w3, target=stopped)
    assert rows(postgres_server, database) == before
    assert recorded_ranges(postgres_server, database) == {"dbo_users": f"{lsn_hex(0x100)}-{lsn_hex(0x160)}"}
    day_old, recent = int(time.time()) - 25 * 3600, int(time.time()) - 60
    with postgres_server.connect(database) as conn:  # what drivers that died left (the job dropped its own)
        assert stage_tables(conn) == []
        for name, created in (
            ("_cdc_stage_dbo_users_0000dead", day_old),
            ("_cdc_stage_dbo_users_0000beef", recent),
        ):
            conn.execute(f"CREATE UNLOGGED TABLE cdc.{name} (id int)")
            conn.execute(f"COMMENT ON TABLE cdc.{name} IS 'sqlserver-cdc staging table created {created}'")
    merge(w2, w3)
    assert rows(postgres_server, database) == EXPECTED_AFTER_THREE
    with postgres_server.connect(database) as conn:  # another run's staging table may still be loading
        assert stage_tables(conn) == ["_cdc_stage_dbo_users_0000beef"]


def stage_tables(conn: Any) -> list[str]:
    found = conn.execute("SELECT relname FROM pg_class WHERE starts_with(relname, '_cdc_stage_') ORDER BY 1")
    return [name for (name,) in found.fetchall()]


DECIMAL = Column("big", "decimal", pa.decimal128(38, 10), precision=38, scale=10, max_length=17)
STAMP = Column("stamp", "datetime2", pa.timestamp("ns"), scale=7, max_length=8, precision=27)
OFFSET = Column("offset_at", "datetimeoffset", pa.string(), scale=7, max_length=10, precision=34)
GUID = Column("guid", "uniqueidentifier", pa.string(), max_length=16)
BLOB = Column("blob", "varbinary", pa.binary(), max_length=-1)
TEXT = Column("note", "nvarchar", pa.string(), max_length=-1)
DAY = Column("day", "date", pa.date32(), max_length=3)
CLOCK = Column("clock", "time", pa.string(), scale=7, max_length=5)
FLAG = Column("flag", "bit", pa.bool_(), max_length=1)
TINY = Column("tiny", "tinyint", pa.int16(), max_length=1)
MONEY = Column("price", "money", pa.decimal128(19, 4), max_length=8)
RATIO = Column("ratio", "float", pa.float64(), precision=53, max_length=8)
TYPES = (INT_KEY, DECIMAL, STAMP, OFFSET, GUID, BLOB, TEXT, DAY, CLOCK, FLAG, TINY, MONEY, RATIO)


def test_types_round_trip_exactly(
    merge: Any, base: Path, postgres_server: PostgresServer, database: str
) -> None:
    guid = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    nanos = int(dt.datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=dt.UTC).timestamp()) * 10**9 + 123456789
    values = {
        "id": 1,
        "big": decimal.Decimal("1234567890123456789012345678.0123456789"),
        "stamp": pa.scalar(nanos, pa.timestamp("ns")).as_py(),
        "offset_at": "2026-03-01T12:30:45.1234567+05:30",
        "guid": guid,
        "blob": b"\x00\xffbinary\x00",
        "note": "ünïcödé " * 200,
        "day": dt.date(1, 1, 1),
        "clock": "23:59:59.9999999",
        "flag": True,
        "tiny": 255,
        "price": decimal.Decimal("-922337203685477.5808"),
        "ratio": 1 / 3,
    }
    log = ChangeLog()
    rows_ = flatten([log.insert(**values), log.insert(id=2)])
    merge(write_window(base, WindowSpec("dbo_types", 0x100, log.lsn, rows_, columns=TYPES)))
    with postgres_server.connect(database) as conn:
        cursor = conn.execute("SELECT * FROM cdc.dbo_types ORDER BY id")
        names = [d.name for d in cursor.description]
        first, second = (dict(zip(names, r, strict=True)) for r in cursor.fetchall())
        types = dict(
            conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'cdc.dbo_types'::regclass AND attnum > 0"
            ).fetchall()
        )
    assert types == {
        "id": "integer",
        "big": "numeric(38,10)",
        "stamp": "timestamp(6) without time zone",
        "offset_at": "timestamp(6) with time zone",
        "guid": "uuid",
        "blob": "bytea",
        "note": "text",
        "day": "date",
        "clock": "time(6) without time zone",
        "flag": "boolean",
        "tiny": "smallint",
        "price": "numeric(19,4)",
        "ratio": "double precision",
        "_cdc_start_lsn": "bytea",
        "_cdc_seqval": "bytea",
        "_cdc_operation": "integer",
        "_cdc_commit_time": "timestamp with time zone",
        "_cdc_deleted": "boolean",
    }
    assert first["big"] == values["big"]
    assert first["stamp"] == dt.datetime(2026, 3, 1, 12, 30, 45, 123456)  # the 7th digit floored
    offset = dt.timezone(dt.timedelta(hours=5, minutes=30))
    assert first["offset_at"] == dt.datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=offset)
    assert first["guid"] == uuid.UUID(guid)
    assert first["blob"] == values["blob"]
    assert first["note"] == values["note"]
    assert first["day"] == dt.date(1, 1, 1)
    assert first["clock"] == dt.time(23, 59, 59, 999999)  # floored, not rounded to the next day
    assert (first["flag"], first["tiny"], first["price"], first["ratio"]) == (
        True,
        255,
        values["price"],
        1 / 3,
    )
    assert first["_cdc_start_lsn"] == bytes.fromhex(lsn_hex(0x110)[2:])
    assert first["_cdc_commit_time"].tzinfo is not None and first["_cdc_deleted"] is False
    assert all(second[n] is None for n in names if not n.startswith("_cdc_") and n != "id")


def test_a_target_lacking_the_driver_or_login_is_refused_with_what_to_do(
    spark: Any, base: Path, postgres_server: PostgresServer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(USER_ENV, raising=False)
    settings = MergeJobSettings(
        manifests=(three_windows(base)[0],), namespace="cdc", target_kind="postgres",
        jdbc_url=postgres_server.jdbc_url(database),
    )  # fmt: skip
    with pytest.raises(MergeJobError, match=USER_ENV):
        run_job(spark, settings)
    monkeypatch.setenv(USER_ENV, postgres_server.user)
    monkeypatch.setenv(PASSWORD_ENV, "wrong")
    with pytest.raises(TableMergeError, match="password authentication failed"):
        run_job(spark, settings)


def test_columns_the_source_adds_or_widens_are_added_and_widened(
    merge: Any, base: Path, postgres_server: PostgresServer, database: str
) -> None:
    log = ChangeLog()
    merge(users_window(base, 0x100, log, [log.insert(id=1, email="a@x")]))
    wider = Column("email", "varchar", pa.string(), max_length=200)
    phone = Column("phone", "nvarchar", pa.string(), max_length=40)
    start = log.lsn + 1
    changes = flatten([log.insert(id=2, email="b" * 150, phone="+49 30 1234")])
    columns = (Column("id", "bigint", pa.int64(), nullable=False, max_length=8), wider, phone)
    merge(write_window(base, WindowSpec("dbo_users", start, log.lsn, changes, columns=columns)))
    with postgres_server.connect(database) as conn:
        types = dict(
            conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'cdc.dbo_users'::regclass AND attnum > 0"
            ).fetchall()
        )
    assert (types["id"], types["email"], types["phone"]) == (
        "bigint",
        "character varying(200)",
        "character varying(20)",
    )
    assert rows(postgres_server, database) == {1: (False, "a@x", None), 2: (False, "b" * 150, "+49 30 1234")}
