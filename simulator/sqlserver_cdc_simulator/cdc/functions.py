"""CDC functions: ``sys.fn_cdc_*`` scalar functions and the per-instance query functions.

Every function returns SQL Server's documented type and the query functions return SQL Server's
exact result columns in order; invalid query ranges raise error 313 exactly as SQL Server does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.cdc import errors
from sqlserver_cdc_simulator.cdc.capture_instance import CaptureInstance
from sqlserver_cdc_simulator.cdc.database_state import CdcDatabase
from sqlserver_cdc_simulator.cdc.lsn import (
    ZERO_LSN,
    coerce_lsn,
    decrement_lsn,
    increment_lsn,
)
from sqlserver_cdc_simulator.cdc.net_changes import (
    NET_ROW_FILTER_OPTIONS,
    net_changes,
)
from sqlserver_cdc_simulator.cdc.session_access import (
    cdc_state,
    current_database,
    is_db_owner,
    is_role_member,
)
from sqlserver_cdc_simulator.cdc.update_mask import is_bit_set
from sqlserver_cdc_simulator.extensions import ResultColumn, Rowset, TypedValue
from sqlserver_cdc_simulator.values import (
    convert,
    datetime_from_ticks,
    round_datetime_ticks,
    ticks_from_datetime,
)

LSN_TYPE = T.binary(10)
UPDATE_MASK_TYPE = T.varbinary(128)
ALL_CHANGES_OPTIONS = ("all", "all update old")
ALL_CHANGES_PREFIX = "cdc.fn_cdc_get_all_changes_"
NET_CHANGES_PREFIX = "cdc.fn_cdc_get_net_changes_"


# --------------------------------------------------------------------------- helpers


def _arg(args: list[TypedValue], index: int) -> Any:
    return args[index].value if index < len(args) else None


def _lsn_arg(args: list[TypedValue], index: int) -> bytes | None:
    value = _arg(args, index)
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return coerce_lsn(value)
    return coerce_lsn(convert(value, args[index].type, LSN_TYPE))


def _text_arg(args: list[TypedValue], index: int) -> str | None:
    value = _arg(args, index)
    if value is None or isinstance(value, str):
        return value
    return convert(value, args[index].type, T.NVARCHAR_MAX)


def _datetime_arg(args: list[TypedValue], index: int) -> dt.datetime | None:
    value = _arg(args, index)
    if value is None:
        return None
    ticks = convert(value, args[index].type, T.DATETIME)
    return datetime_from_ticks(ticks)


def _int_arg(args: list[TypedValue], index: int) -> int | None:
    value = _arg(args, index)
    if value is None:
        return None
    return int(convert(value, args[index].type, T.INT))


def datetime_ticks(value: dt.datetime | None) -> int | None:
    """A Python datetime as a simulator ``datetime`` value (ticks on the 1/300 s grid)."""
    return None if value is None else round_datetime_ticks(ticks_from_datetime(value))


def can_read_change_data(session: Any, database: Any, instance: CaptureInstance) -> bool:
    """sysadmin / db_owner, or membership in the instance's gating role when it has one."""
    if is_db_owner(session, database):
        return True
    if instance.role_name is None:
        return True
    return is_role_member(session, database, instance.role_name)


def _state(session: Any) -> tuple[Any, CdcDatabase | None]:
    database = current_database(session)
    return database, cdc_state(database)


def _require_state(session: Any, missing_object: str) -> tuple[Any, CdcDatabase]:
    database, state = _state(session)
    if state is None:
        raise errors.invalid_object_name(missing_object)
    return database, state


# --------------------------------------------------------------------------- scalar functions


def _visible_instance(session: Any, name: str | None) -> CaptureInstance | None:
    """Capture instance *name* if it exists and the caller may read its changes, else None.

    The metadata functions answer a default (NULL, zero LSN) rather than an error in both cases.
    """
    database, state = _state(session)
    if state is None:
        return None
    instance = state.instance(name)
    if instance is None or not can_read_change_data(session, database, instance):
        return None
    return instance


def fn_cdc_get_max_lsn(session: Any, args: list[TypedValue]) -> bytes | None:
    """``sys.fn_cdc_get_max_lsn()``: the largest ``start_lsn`` of ``cdc.lsn_time_mapping``."""
    _, state = _require_state(session, "cdc.lsn_time_mapping")
    return state.mapping.max_lsn()


def fn_cdc_get_min_lsn(session: Any, args: list[TypedValue]) -> bytes | None:
    """``sys.fn_cdc_get_min_lsn(ci)``: the instance's low-water mark; all zeros if unknown or not readable."""
    instance = _visible_instance(session, _text_arg(args, 0))
    if instance is None or instance.start_lsn is None:
        return ZERO_LSN
    return instance.start_lsn


def fn_cdc_increment_lsn(session: Any, args: list[TypedValue]) -> bytes | None:
    """``sys.fn_cdc_increment_lsn(lsn)``."""
    lsn = _lsn_arg(args, 0)
    return None if lsn is None else increment_lsn(lsn)


def fn_cdc_decrement_lsn(session: Any, args: list[TypedValue]) -> bytes | None:
    """``sys.fn_cdc_decrement_lsn(lsn)``."""
    lsn = _lsn_arg(args, 0)
    return None if lsn is None else decrement_lsn(lsn)


def fn_cdc_map_time_to_lsn(session: Any, args: list[TypedValue]) -> bytes | None:
    """``sys.fn_cdc_map_time_to_lsn(relational_operator, tracking_time)``."""
    _, state = _require_state(session, "cdc.lsn_time_mapping")
    return state.mapping.map_time_to_lsn(_text_arg(args, 0), _datetime_arg(args, 1))


def fn_cdc_map_lsn_to_time(session: Any, args: list[TypedValue]) -> int | None:
    """``sys.fn_cdc_map_lsn_to_time(lsn)``: returns ``datetime``."""
    state = cdc_state(current_database(session))  # _require_state inlined: called once per change row
    if state is None:
        raise errors.invalid_object_name("cdc.lsn_time_mapping")
    value = args[0].value if args else None
    if value is None:
        return None
    lsn = value if type(value) is bytes and len(value) == 10 else _lsn_arg(args, 0)
    # Called once per change row with the row's __$start_lsn: consecutive rows share it.
    cached = state.lsn_time_cache
    version = state.mapping.version
    if cached is not None and cached[0] == lsn and cached[1] == version:
        return cached[2]
    ticks = datetime_ticks(state.mapping.map_lsn_to_time(lsn))
    state.lsn_time_cache = (lsn, version, ticks)
    return ticks


def fn_cdc_get_column_ordinal(session: Any, args: list[TypedValue]) -> int | None:
    """``sys.fn_cdc_get_column_ordinal(ci, column)``: NULL when the column is not captured."""
    instance = _visible_instance(session, _text_arg(args, 0))
    return None if instance is None else instance.column_ordinal(_text_arg(args, 1))


def fn_cdc_is_bit_set(session: Any, args: list[TypedValue]) -> int | None:
    """``sys.fn_cdc_is_bit_set(position, update_mask)``: returns ``bit``."""
    mask = _arg(args, 1)
    result = is_bit_set(_int_arg(args, 0), None if mask is None else bytes(mask))
    return None if result is None else int(result)


def fn_cdc_has_column_changed(session: Any, args: list[TypedValue]) -> int | None:
    """``sys.fn_cdc_has_column_changed(ci, column, update_mask)``: returns ``bit``."""
    ordinal = fn_cdc_get_column_ordinal(session, args[:2])
    mask = _arg(args, 2)
    result = is_bit_set(ordinal, None if mask is None else bytes(mask))
    return None if result is None else int(result)


SCALAR_FUNCTIONS: dict[str, tuple[Any, T.SqlType]] = {
    "sys.fn_cdc_get_max_lsn": (fn_cdc_get_max_lsn, LSN_TYPE),
    "sys.fn_cdc_get_min_lsn": (fn_cdc_get_min_lsn, LSN_TYPE),
    "sys.fn_cdc_increment_lsn": (fn_cdc_increment_lsn, LSN_TYPE),
    "sys.fn_cdc_decrement_lsn": (fn_cdc_decrement_lsn, LSN_TYPE),
    "sys.fn_cdc_map_time_to_lsn": (fn_cdc_map_time_to_lsn, LSN_TYPE),
    "sys.fn_cdc_map_lsn_to_time": (fn_cdc_map_lsn_to_time, T.DATETIME),
    "sys.fn_cdc_get_column_ordinal": (fn_cdc_get_column_ordinal, T.INT),
    "sys.fn_cdc_is_bit_set": (fn_cdc_is_bit_set, T.BIT),
    "sys.fn_cdc_has_column_changed": (fn_cdc_has_column_changed, T.BIT),
}


# --------------------------------------------------------------------------- query functions


def captured_result_columns(instance: CaptureInstance) -> list[ResultColumn]:
    """The captured columns as the query functions and the change table return them (all nullable)."""
    return [ResultColumn(c.name, c.sql_type, True) for c in instance.captured_columns]


def _resolve(session: Any, suffix: str, kind: str) -> tuple[Any, CdcDatabase, CaptureInstance]:
    function_name = f"cdc.fn_cdc_get_{kind}_changes_{suffix}"
    database, state = _state(session)
    instance = None if state is None else state.instance(suffix)
    if state is None or instance is None or (kind == "net" and not instance.supports_net_changes):
        raise errors.invalid_object_name(function_name)
    if not can_read_change_data(session, database, instance):
        raise errors.select_permission_denied(
            object_name=f"fn_cdc_get_{kind}_changes_{instance.name}", database=database.name, schema="cdc"
        )
    return database, state, instance


def _validated_range(
    state: CdcDatabase, instance: CaptureInstance, args: list[TypedValue], kind: str, options: tuple[str, ...]
) -> tuple[bytes, bytes, str]:
    """Check the request as ``sys.fn_cdc_check_parameters`` does; any failure is error 313."""
    if len(args) != 3:
        raise errors.insufficient_arguments(kind)
    from_lsn, to_lsn = _lsn_arg(args, 0), _lsn_arg(args, 1)
    option_text = _text_arg(args, 2)
    option = " ".join(option_text.lower().split()) if option_text is not None else None
    max_lsn = state.mapping.max_lsn()
    if (
        from_lsn is None
        or to_lsn is None
        or option not in options
        or from_lsn > to_lsn
        or instance.start_lsn is None
        or from_lsn < instance.start_lsn
        or max_lsn is None
        or to_lsn > max_lsn
    ):
        raise errors.insufficient_arguments(kind)
    return from_lsn, to_lsn, option  # type: ignore[return-value]


def fn_cdc_get_all_changes(session: Any, suffix: str, args: list[TypedValue]) -> Rowset:
    """``cdc.fn_cdc_get_all_changes_<ci>(from_lsn, to_lsn, N'all' | N'all update old')``."""
    _, state, instance = _resolve(session, suffix, "all")
    from_lsn, to_lsn, option = _validated_range(state, instance, args, "all", ALL_CHANGES_OPTIONS)
    rows = instance.change_table.window(from_lsn, to_lsn, include_update_old=option == "all update old")
    columns = [
        ResultColumn("__$start_lsn", LSN_TYPE, False),
        ResultColumn("__$seqval", LSN_TYPE, False),
        ResultColumn("__$operation", T.INT, False),
        ResultColumn("__$update_mask", UPDATE_MASK_TYPE, True),
        *captured_result_columns(instance),
    ]
    return Rowset(columns, rows)


def fn_cdc_get_net_changes(session: Any, suffix: str, args: list[TypedValue]) -> Rowset:
    """``cdc.fn_cdc_get_net_changes_<ci>(from_lsn, to_lsn, N'all' | N'all with mask' | N'all with merge')``."""
    _, state, instance = _resolve(session, suffix, "net")
    from_lsn, to_lsn, option = _validated_range(state, instance, args, "net", NET_ROW_FILTER_OPTIONS)
    rows = instance.change_table.window(from_lsn, to_lsn, include_update_old=False)
    columns = [
        ResultColumn("__$start_lsn", LSN_TYPE, True),
        ResultColumn("__$operation", T.INT, True),
        ResultColumn("__$update_mask", UPDATE_MASK_TYPE, True),
        *captured_result_columns(instance),
    ]
    return Rowset(columns, net_changes(rows, instance.key_ordinals, option))


TABLE_FUNCTION_PREFIXES = {
    ALL_CHANGES_PREFIX: fn_cdc_get_all_changes,
    NET_CHANGES_PREFIX: fn_cdc_get_net_changes,
}
