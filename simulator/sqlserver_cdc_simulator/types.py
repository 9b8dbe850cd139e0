"""SqlType: a SQL Server data type as declared (name, length, precision, scale).

Values of each type are held as plain Python objects chosen so that 100 ns precision is kept
exactly and comparisons are cheap:

==========================================  =============================================
type                                        Python value
==========================================  =============================================
bit, tinyint, smallint, int, bigint          ``int`` (bit: 0 or 1)
decimal, numeric, money, smallmoney          ``decimal.Decimal`` quantized to the scale
real, float                                  ``float``
char, varchar, nchar, nvarchar, text, ntext  ``str``
binary, varbinary, image, rowversion         ``bytes``
uniqueidentifier                             ``uuid.UUID``
date                                         ``int`` days since 0001-01-01
time(n)                                      ``int`` 100 ns ticks since midnight
datetime, smalldatetime, datetime2(n)        ``int`` 100 ns ticks since 0001-01-01 00:00
datetimeoffset(n)                            :class:`~.values.DateTimeOffset` (UTC ticks, offset minutes)
==========================================  =============================================

NULL is ``None`` for every type.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SqlError

#: system type ids (``sys.types.system_type_id``) and storage sizes.
TYPE_IDS: dict[str, int] = {
    "image": 34,
    "text": 35,
    "uniqueidentifier": 36,
    "date": 40,
    "time": 41,
    "datetime2": 42,
    "datetimeoffset": 43,
    "tinyint": 48,
    "smallint": 52,
    "int": 56,
    "smalldatetime": 58,
    "real": 59,
    "money": 60,
    "datetime": 61,
    "float": 62,
    "sql_variant": 98,
    "ntext": 99,
    "bit": 104,
    "decimal": 106,
    "numeric": 108,
    "smallmoney": 122,
    "bigint": 127,
    "varbinary": 165,
    "varchar": 167,
    "binary": 173,
    "char": 175,
    "timestamp": 189,
    "nvarchar": 231,
    "sysname": 231,
    "nchar": 239,
    "xml": 241,
}

FIXED_SIZES: dict[str, tuple[int, int, int]] = {
    # name: (max_length, precision, scale) as sys.columns reports them
    "bit": (1, 1, 0),
    "tinyint": (1, 3, 0),
    "smallint": (2, 5, 0),
    "int": (4, 10, 0),
    "bigint": (8, 19, 0),
    "money": (8, 19, 4),
    "smallmoney": (4, 10, 4),
    "real": (4, 24, 0),
    "float": (8, 53, 0),
    "date": (3, 10, 0),
    "datetime": (8, 23, 3),
    "smalldatetime": (4, 16, 0),
    "uniqueidentifier": (16, 0, 0),
    "timestamp": (8, 0, 0),
    "text": (16, 0, 0),
    "ntext": (16, 0, 0),
    "image": (16, 0, 0),
}

INTEGER_TYPES = frozenset({"bit", "tinyint", "smallint", "int", "bigint"})
EXACT_TYPES = frozenset({"decimal", "numeric", "money", "smallmoney"})
FLOAT_TYPES = frozenset({"real", "float"})
CHAR_TYPES = frozenset({"char", "varchar", "text"})
NCHAR_TYPES = frozenset({"nchar", "nvarchar", "ntext"})
STRING_TYPES = CHAR_TYPES | NCHAR_TYPES
BINARY_TYPES = frozenset({"binary", "varbinary", "image", "timestamp"})
DATETIME_TYPES = frozenset({"datetime", "smalldatetime", "datetime2"})
TEMPORAL_TYPES = DATETIME_TYPES | {"date", "time", "datetimeoffset"}

# Data type precedence (https://learn.microsoft.com/sql/t-sql/data-types/data-type-precedence-transact-sql):
# a higher number wins an implicit conversion.
_PRECEDENCE_ORDER = [
    "binary",
    "varbinary",
    "char",
    "varchar",
    "nchar",
    "nvarchar",
    "uniqueidentifier",
    "timestamp",
    "image",
    "text",
    "ntext",
    "bit",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "smallmoney",
    "money",
    "decimal",
    "numeric",
    "real",
    "float",
    "time",
    "date",
    "smalldatetime",
    "datetime",
    "datetime2",
    "datetimeoffset",
    "xml",
    "sql_variant",
]
PRECEDENCE: dict[str, int] = {name: i for i, name in enumerate(_PRECEDENCE_ORDER)}

MAX = -1  # length of (n)varchar(max) / varbinary(max)


@dataclass(frozen=True, slots=True)
class SqlType:
    """A declared SQL Server type.

    :param name: canonical lower-case type name (``nvarchar``, ``datetime2``, ``timestamp`` for rowversion)
    :param length: characters for char types, bytes for binary types, :data:`MAX` for ``(max)``
    :param precision: decimal/numeric precision
    :param scale: decimal/numeric scale, or fractional-second digits of time/datetime2/datetimeoffset
    """

    name: str
    length: int = 0
    precision: int = 0
    scale: int = 0

    @property
    def is_max(self) -> bool:
        return self.length == MAX and self.name in ("varchar", "nvarchar", "varbinary")

    @property
    def max_length(self) -> int:
        """``sys.columns.max_length``: bytes, -1 for max."""
        n = self.name
        if n in ("char", "varchar", "binary", "varbinary"):
            return self.length
        if n in ("nchar", "nvarchar"):
            return -1 if self.length == MAX else self.length * 2
        if n in ("decimal", "numeric"):
            return decimal_storage(self.precision)
        if n == "time":
            return (3, 3, 3, 4, 4, 5, 5, 5)[self.scale]
        if n == "datetime2":
            return (6, 6, 6, 7, 7, 8, 8, 8)[self.scale]
        if n == "datetimeoffset":
            return (8, 8, 8, 9, 9, 10, 10, 10)[self.scale]
        return FIXED_SIZES.get(n, (0, 0, 0))[0]

    @property
    def catalog_precision(self) -> int:
        """``sys.columns.precision``."""
        n = self.name
        if n in ("decimal", "numeric"):
            return self.precision
        if n == "time":
            return 8 + (self.scale + 1 if self.scale else 0)
        if n == "datetime2":
            return 19 + (self.scale + 1 if self.scale else 0)
        if n == "datetimeoffset":
            return 26 + (self.scale + 1 if self.scale else 0)
        return FIXED_SIZES.get(n, (0, 0, 0))[1]

    @property
    def catalog_scale(self) -> int:
        """``sys.columns.scale``."""
        if self.name in ("decimal", "numeric", "time", "datetime2", "datetimeoffset"):
            return self.scale
        return FIXED_SIZES.get(self.name, (0, 0, 0))[2]

    @property
    def type_id(self) -> int:
        return TYPE_IDS[self.name]

    def sql(self) -> str:
        """The type as T-SQL declares it, e.g. ``nvarchar(max)``, ``decimal(18,2)``."""
        n = self.name
        if n in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
            return f"{n}({'max' if self.length == MAX else self.length})"
        if n in ("decimal", "numeric"):
            return f"{n}({self.precision},{self.scale})"
        if n in ("time", "datetime2", "datetimeoffset"):
            return f"{n}({self.scale})"
        return n

    def __str__(self) -> str:
        return self.sql()


def decimal_storage(precision: int) -> int:
    """Storage bytes of decimal(p, s)."""
    if precision <= 9:
        return 5
    if precision <= 19:
        return 9
    if precision <= 28:
        return 13
    return 17


# Common instances.
BIT = SqlType("bit")
TINYINT = SqlType("tinyint")
SMALLINT = SqlType("smallint")
INT = SqlType("int")
BIGINT = SqlType("bigint")
FLOAT = SqlType("float")
REAL = SqlType("real")
MONEY = SqlType("money", precision=19, scale=4)
SMALLMONEY = SqlType("smallmoney", precision=10, scale=4)
DATE = SqlType("date")
DATETIME = SqlType("datetime")
SMALLDATETIME = SqlType("smalldatetime")
DATETIME2 = SqlType("datetime2", scale=7)
DATETIMEOFFSET = SqlType("datetimeoffset", scale=7)
TIME = SqlType("time", scale=7)
UNIQUEIDENTIFIER = SqlType("uniqueidentifier")
ROWVERSION = SqlType("timestamp", length=8)
SYSNAME = SqlType("nvarchar", length=128)
SQL_VARIANT = SqlType("sql_variant")
NVARCHAR_MAX = SqlType("nvarchar", length=MAX)
VARBINARY_MAX = SqlType("varbinary", length=MAX)


def nvarchar(n: int) -> SqlType:
    return SqlType("nvarchar", length=n)


def varchar(n: int) -> SqlType:
    return SqlType("varchar", length=n)


def varbinary(n: int) -> SqlType:
    return SqlType("varbinary", length=n)


def binary(n: int) -> SqlType:
    return SqlType("binary", length=n)


def decimal_type(precision: int, scale: int) -> SqlType:
    return SqlType("decimal", precision=precision, scale=scale)


_ALIASES = {
    "integer": "int",
    "rowversion": "timestamp",
    "double": "float",
    "dec": "decimal",
    "character": "char",
    "national": "nchar",
}


def make_type(name: str, args: list[str] | None = None) -> SqlType:
    """Build a SqlType from a type name and its arguments as written (``('nvarchar', ['max'])``)."""
    name = _ALIASES.get(name.lower(), name.lower())
    args = [a.strip().lower() for a in (args or [])]
    if name == "sysname":
        return SYSNAME
    if name in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
        if not args:
            return SqlType(name, length=1)
        if args[0] == "max":
            if name in ("char", "nchar", "binary"):
                raise SqlError(
                    2716,
                    16,
                    1,
                    f"Column, parameter, or variable #1: Cannot specify a column width on data type {name}.",
                )
            return SqlType(name, length=MAX)
        n = int(args[0])
        limit = 4000 if name in ("nchar", "nvarchar") else 8000
        if n < 1 or n > limit:
            raise SqlError(
                131,
                15,
                2,
                f"The size ({n}) given to the type '{name}' exceeds the maximum allowed for any data type ({limit}).",
            )
        return SqlType(name, length=n)
    if name in ("decimal", "numeric"):
        p = int(args[0]) if args else 18
        s = int(args[1]) if len(args) > 1 else 0
        if not 1 <= p <= 38:
            raise SqlError(1002 if p > 38 else 1002, 16, 1, f"Line 1: Specified scale {p} is invalid.")
        if not 0 <= s <= p:
            raise SqlError(192, 16, 1, "The scale must be less than or equal to the precision.")
        return SqlType(name, precision=p, scale=s)
    if name == "float":
        if args and int(args[0]) <= 24:
            return REAL
        return FLOAT
    if name in ("time", "datetime2", "datetimeoffset"):
        s = int(args[0]) if args else 7
        if not 0 <= s <= 7:
            raise SqlError(1002, 16, 1, f"Specified scale {s} is invalid.")
        return SqlType(name, scale=s)
    if name == "timestamp":
        return ROWVERSION
    if name in ("money", "smallmoney"):
        return MONEY if name == "money" else SMALLMONEY
    if name in FIXED_SIZES:
        return SqlType(name)
    if name in ("xml", "sql_variant", "geography", "geometry", "hierarchyid", "cursor", "table"):
        raise SqlError(40517, 16, 1, f"The SQL Server simulator does not support the data type {name}.")
    raise SqlError(2715, 16, 6, f"Column, parameter, or variable #1: Cannot find data type {name}.")


def higher_precedence(a: SqlType, b: SqlType) -> SqlType:
    """The type an implicit conversion between *a* and *b* converts to."""
    return a if PRECEDENCE.get(a.name, 0) >= PRECEDENCE.get(b.name, 0) else b


def is_string(t: SqlType) -> bool:
    return t.name in STRING_TYPES


def is_numeric(t: SqlType) -> bool:
    n = t.name
    return n in INTEGER_TYPES or n in EXACT_TYPES or n in FLOAT_TYPES


def decimal_params(t: SqlType) -> tuple[int, int]:
    """(precision, scale) a numeric type has when it takes part in decimal arithmetic."""
    n = t.name
    if n in ("decimal", "numeric"):
        return t.precision, t.scale
    if n == "money":
        return 19, 4
    if n == "smallmoney":
        return 10, 4
    if n == "bigint":
        return 19, 0
    if n == "int":
        return 10, 0
    if n == "smallint":
        return 5, 0
    if n in ("tinyint", "bit"):
        return 3, 0
    return 38, 10
