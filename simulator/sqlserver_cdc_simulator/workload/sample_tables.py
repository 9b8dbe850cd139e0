"""The four tables of the sample database: their columns, keys and how each value is drawn."""

from __future__ import annotations

import decimal

from sqlserver_cdc_simulator.workload.odbc_client import iso_offset, iso_time
from sqlserver_cdc_simulator.workload.schema import ColumnSpec, SampleTable
from sqlserver_cdc_simulator.workload.value_generators import (
    date,
    datetime2,
    datetimeoffset,
    decimal_number,
    guid,
    legacy_datetime,
    money,
    nullable,
    smalldatetime,
    text,
    time_of_day,
    unicode_text,
)

#: ``dbo.customers`` (integer key plus a unique secondary key on ``email``), ``dbo.orders`` (bigint
#: key), ``dbo.order_lines`` (composite primary key) and ``dbo.type_zoo`` (one column of every data
#: type the provider supports).
SAMPLE_TABLES: tuple[SampleTable, ...] = (
    SampleTable(
        "dbo",
        "customers",
        (
            ColumnSpec("customer_id", "int NOT NULL", lambda rng: 0),
            ColumnSpec("email", "nvarchar(200) NOT NULL", lambda rng: ""),
            ColumnSpec("name", "nvarchar(100) NOT NULL", lambda rng: text(rng, 30).strip() or "x"),
            ColumnSpec(
                "country", "char(2) NULL", nullable(lambda rng: rng.choice(["DE", "FR", "US", "JP", "BR"]))
            ),
            ColumnSpec("is_active", "bit NOT NULL", lambda rng: rng.random() < 0.8),
            ColumnSpec("credit_limit", "money NULL", nullable(money)),
            ColumnSpec("created_at", "datetime2(7) NOT NULL", lambda rng: datetime2(rng)),
            ColumnSpec("notes", "nvarchar(max) NULL", nullable(lambda rng: unicode_text(rng, 40), 0.4)),
        ),
        key=("customer_id",),
        unique="email",
    ),
    SampleTable(
        "dbo",
        "orders",
        (
            ColumnSpec("order_id", "bigint NOT NULL", lambda rng: 0),
            ColumnSpec("customer_id", "int NOT NULL", lambda rng: rng.randint(1, 1000)),
            ColumnSpec("order_date", "date NOT NULL", date),
            ColumnSpec(
                "status", "varchar(20) NOT NULL", lambda rng: rng.choice(["new", "paid", "shipped", "void"])
            ),
            ColumnSpec("amount", "decimal(18,2) NOT NULL", lambda rng: decimal_number(rng, 18, 2)),
            ColumnSpec("discount", "smallmoney NULL", nullable(lambda rng: money(rng, 1000))),
            ColumnSpec("priority", "tinyint NOT NULL", lambda rng: rng.randint(0, 255)),
            ColumnSpec("weight_kg", "real NULL", nullable(lambda rng: rng.randint(0, 40_000) / 4)),
            ColumnSpec("ship_time", "time(3) NULL", nullable(lambda rng: time_of_day(rng, 3)), iso_time),
            ColumnSpec("updated_at", "datetime NOT NULL", legacy_datetime),
        ),
        key=("order_id",),
    ),
    SampleTable(
        "dbo",
        "order_lines",
        (
            ColumnSpec("order_id", "bigint NOT NULL", lambda rng: 0),
            ColumnSpec("line_no", "smallint NOT NULL", lambda rng: 0),
            ColumnSpec("product_code", "varchar(30) NOT NULL", lambda rng: f"P-{rng.randint(1, 9999):04d}"),
            ColumnSpec("quantity", "int NOT NULL", lambda rng: rng.randint(1, 500)),
            ColumnSpec(
                "unit_price", "numeric(12,4) NOT NULL", lambda rng: decimal_number(rng, 12, 4).copy_abs()
            ),
            ColumnSpec("comment", "nvarchar(100) NULL", nullable(lambda rng: unicode_text(rng, 20), 0.5)),
        ),
        key=("order_id", "line_no"),
    ),
    SampleTable(
        "dbo",
        "type_zoo",
        (
            ColumnSpec("id", "int NOT NULL", lambda rng: 0),
            ColumnSpec("c_bit", "bit NULL", nullable(lambda rng: rng.random() < 0.5)),
            ColumnSpec("c_tinyint", "tinyint NULL", nullable(lambda rng: rng.randint(0, 255))),
            ColumnSpec("c_smallint", "smallint NULL", nullable(lambda rng: rng.randint(-32768, 32767))),
            ColumnSpec("c_int", "int NULL", nullable(lambda rng: rng.randint(-(2**31), 2**31 - 1))),
            ColumnSpec("c_bigint", "bigint NULL", nullable(lambda rng: rng.randint(-(2**63), 2**63 - 1))),
            ColumnSpec(
                "c_decimal",
                "decimal(38,10) NULL",
                nullable(lambda rng: decimal.Decimal(rng.randint(-(10**37) + 1, 10**37 - 1)).scaleb(-10)),
            ),
            ColumnSpec("c_numeric", "numeric(9,3) NULL", nullable(lambda rng: decimal_number(rng, 9, 3))),
            ColumnSpec("c_money", "money NULL", nullable(money)),
            ColumnSpec("c_smallmoney", "smallmoney NULL", nullable(lambda rng: money(rng, 200_000))),
            ColumnSpec("c_real", "real NULL", nullable(lambda rng: rng.randint(-(2**20), 2**20) / 8)),
            ColumnSpec("c_float", "float NULL", nullable(lambda rng: rng.uniform(-1e12, 1e12))),
            ColumnSpec("c_char", "char(10) NULL", nullable(lambda rng: text(rng, 10).ljust(10))),
            ColumnSpec("c_varchar", "varchar(50) NULL", nullable(lambda rng: text(rng, 50))),
            ColumnSpec("c_varchar_max", "varchar(max) NULL", nullable(lambda rng: text(rng, 200))),
            ColumnSpec("c_nchar", "nchar(10) NULL", nullable(lambda rng: text(rng, 10, "abcΩж").ljust(10))),
            ColumnSpec("c_nvarchar", "nvarchar(50) NULL", nullable(lambda rng: unicode_text(rng, 20))),
            ColumnSpec("c_nvarchar_max", "nvarchar(max) NULL", nullable(lambda rng: unicode_text(rng, 100))),
            ColumnSpec("c_binary", "binary(8) NULL", nullable(lambda rng: rng.randbytes(8))),
            ColumnSpec(
                "c_varbinary", "varbinary(50) NULL", nullable(lambda rng: rng.randbytes(rng.randint(0, 50)))
            ),
            ColumnSpec(
                "c_varbinary_max",
                "varbinary(max) NULL",
                nullable(lambda rng: rng.randbytes(rng.randint(0, 300))),
            ),
            ColumnSpec("c_date", "date NULL", nullable(date)),
            ColumnSpec("c_time", "time(7) NULL", nullable(lambda rng: time_of_day(rng, 6)), iso_time),
            ColumnSpec("c_datetime", "datetime NULL", nullable(legacy_datetime)),
            ColumnSpec("c_smalldatetime", "smalldatetime NULL", nullable(smalldatetime)),
            ColumnSpec("c_datetime2", "datetime2(7) NULL", nullable(lambda rng: datetime2(rng, 6))),
            ColumnSpec("c_datetime2_3", "datetime2(3) NULL", nullable(lambda rng: datetime2(rng, 3))),
            ColumnSpec("c_datetimeoffset", "datetimeoffset(7) NULL", nullable(datetimeoffset), iso_offset),
            ColumnSpec("c_uniqueidentifier", "uniqueidentifier NULL", nullable(guid)),
            ColumnSpec("c_rowversion", "rowversion", None),
        ),
        key=("id",),
    ),
)
