"""SQL Server's Change Tracking errors (numbers and texts from the error catalogue)."""

from __future__ import annotations

from sqlserver_cdc_simulator.errors import SqlError


# One function per SQL Server message, on purpose: each mirrors one catalogue entry (number, severity,
# state, text) that a client may match, so these same-shape blocks stay one by one (issue 34 item 6).
def database_not_enabled_for_table(database: str, table: str) -> SqlError:
    """Msg 1718: ENABLE CHANGE_TRACKING on a table of a database without change tracking."""
    return SqlError(
        1718,
        16,
        1,
        f"Change tracking must be enabled on database '{database}' before it can be enabled on table '{table}'.",
    )


def table_already_enabled(table: str) -> SqlError:
    """Msg 4996: ENABLE CHANGE_TRACKING twice."""
    return SqlError(4996, 16, 1, f"Change tracking is already enabled for table '{table}'.")


def primary_key_required(table: str) -> SqlError:
    """Msg 4997: a table without a primary key."""
    return SqlError(
        4997,
        16,
        1,
        f"Cannot enable change tracking on table '{table}'. Change tracking requires a primary key on the "
        "table. Create a primary key on the table before enabling change tracking.",
    )


def table_not_enabled_for_disable(table: str) -> SqlError:
    """Msg 4998: DISABLE CHANGE_TRACKING on a table that is not tracked."""
    return SqlError(4998, 16, 1, f"Change tracking is not enabled on table '{table}'.")


def table_not_enabled(table: str) -> SqlError:
    """Msg 22105: CHANGETABLE on a table that is not tracked."""
    return SqlError(22105, 16, 1, f"Change tracking is not enabled on table '{table}'.")


def database_already_enabled(database: str) -> SqlError:
    """Msg 5088: SET CHANGE_TRACKING = ON twice."""
    return SqlError(5088, 16, 1, f"Change tracking is already enabled for database '{database}'.")


def database_not_enabled(database: str) -> SqlError:
    """Msg 5089: change tracking options or OFF on a database without change tracking."""
    return SqlError(
        5089,
        16,
        1,
        f"Change tracking is disabled for database '{database}'. Change tracking must be enabled on a "
        "database to modify change tracking settings.",
    )


def tables_still_enabled(database: str) -> SqlError:
    """Msg 22115: SET CHANGE_TRACKING = OFF while tables are tracked."""
    return SqlError(
        22115,
        16,
        1,
        f"Change tracking is enabled for one or more tables in database '{database}'. Disable change "
        "tracking on each table before disabling it for the database. Use the sys.change_tracking_tables "
        "catalog view to obtain a list of tables for which change tracking is enabled.",
    )


def options_combined() -> SqlError:
    """Msg 22114: change tracking options mixed with other ALTER DATABASE options."""
    return SqlError(
        22114,
        16,
        1,
        "Change tracking options for ALTER DATABASE cannot be combined with other ALTER DATABASE options.",
    )


def changetable_alias_required() -> SqlError:
    """Msg 22104: CHANGETABLE(...) without a table alias (changetable-transact-sql.md: the alias is required)."""
    return SqlError(22104, 16, 1, "A table returned by the CHANGETABLE function must be aliased.")


def primary_key_drop_refused(constraint: str, table: str) -> SqlError:
    """Msg 3735: ALTER TABLE ... DROP CONSTRAINT of a change-tracked table's primary key."""
    return SqlError(
        3735,
        16,
        1,
        f"The primary key constraint '{constraint}' on table '{table}' cannot be dropped because change tracking "
        "is enabled on the table. Change tracking requires a primary key constraint on the table. Disable change "
        "tracking before dropping the constraint.",
    )
