"""``max text repl size``: LOB values written to a CDC-enabled table beyond it fail (error 7139), and ``sp_configure``.

SQL Server refuses an INSERT or UPDATE of a table enabled for change data capture (or published
for replication) that writes a ``text``, ``ntext``, ``image``, ``varchar(max)``, ``nvarchar(max)``,
``varbinary(max)`` or ``xml`` value longer than the server option ``max text repl size`` (bytes;
default 65,536; -1: no limit): the statement fails with error 7139 and writes nothing
(docs/database-engine/configure-windows/configure-the-max-text-repl-size-server-configuration-option.md).
``sp_configure 'max text repl size', n`` changes the option; here it takes effect at once (SQL
Server applies it at ``RECONFIGURE``, which the simulator accepts as a no-op).
"""

from __future__ import annotations

from typing import Any

from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.extensions import ProcedureArgs, ProcedureResult

OPTION = "max text repl size (B)"
DEFAULT = 65536
_ATTRIBUTE = "max_text_repl_size"
_LOB_TYPES = frozenset({"text", "ntext", "image", "xml"})


def max_text_repl_size(engine: Any) -> int:
    """The server's ``max text repl size`` in bytes (-1: no limit)."""
    return int(getattr(engine, _ATTRIBUTE, DEFAULT))


def _is_lob(sql_type: Any) -> bool:
    return sql_type.name in _LOB_TYPES or bool(getattr(sql_type, "is_max", False))


def lob_bytes(sql_type: Any, value: Any) -> int:
    """The length in bytes SQL Server counts for a LOB value (UTF-16 for the Unicode types and xml)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    text = str(value)
    if sql_type.name in ("nvarchar", "ntext", "xml"):
        return len(text.encode("utf-16-le"))
    return len(text.encode("cp1252", errors="replace"))


def check_replicated_lob(engine: Any, table: Any, column: Any, value: Any) -> None:
    """Raise error 7139 for a LOB value over ``max text repl size`` written to a CDC-enabled table."""
    if value is None or not table.flags.get("is_tracked_by_cdc") or not _is_lob(column.type):
        return
    limit = max_text_repl_size(engine)
    size = lob_bytes(column.type, value)
    if limit != -1 and size > limit:
        raise SqlError(
            7139,
            16,
            1,
            f"Length of LOB data ({size}) to be replicated exceeds configured maximum {limit}. Use the stored "
            "procedure sp_configure to increase the configured maximum value for max text repl size option, "
            "which defaults to 65536 bytes. A configured value of -1 indicates no limit, other that the limit "
            "imposed by the data type.",
        )


def sp_configure(session: Any, args: ProcedureArgs) -> ProcedureResult:
    """``sp_configure``: ``show advanced options`` and ``max text repl size`` (others: error 15123)."""
    name = args.get("configname", 0)
    value = args.get("configvalue", 1)
    name = None if name is None else str(getattr(name, "value", name)).strip().lower()
    value = None if value is None else getattr(value, "value", value)
    if name is None:
        return ProcedureResult()
    if name in ("show advanced options", "show advanced option"):
        return ProcedureResult(
            messages=[
                f"Configuration option 'show advanced options' changed from 0 to {int(value or 0)}. Run the "
                "RECONFIGURE statement to install."
            ]
        )
    if not OPTION.startswith(name):
        raise SqlError(
            15123,
            16,
            1,
            f"The configuration option '{name}' does not exist, or it may be an advanced option.",
        )
    engine = session.engine
    before = max_text_repl_size(engine)
    if value is None:
        return ProcedureResult()
    number = int(value)
    if number < -1:
        raise SqlError(15129, 16, 1, f"'{number}' is not a valid value for configuration option '{OPTION}'.")
    setattr(engine, _ATTRIBUTE, number)
    return ProcedureResult(
        messages=[
            f"Configuration option '{OPTION}' changed from {before} to {number}. Run the RECONFIGURE statement "
            "to install."
        ]
    )


def reconfigure(session: Any, args: ProcedureArgs) -> ProcedureResult:
    """``RECONFIGURE``: the options ``sp_configure`` changed are in effect already."""
    return ProcedureResult()
