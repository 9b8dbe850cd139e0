"""Catalog views of objects the simulator cannot create: always empty, with SQL Server's columns.

The simulator has no views, stored procedures, triggers, FOREIGN KEY or CHECK constraints
(creating one is error 40517), so the views listing them are rightly empty. Tools and drivers
query them when they reflect a schema (foreign keys, view definitions); an empty answer is the
true one. Columns follow docs/relational-databases/system-catalog-views/sys-*-transact-sql.md and
docs/relational-databases/system-information-schema-views/*-transact-sql.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlserver_cdc_simulator.extensions import ResultColumn, Rowset, result_columns

# the columns every sys.objects-derived view starts with (sys-objects-transact-sql.md)
_OBJECT = """
    name sysname NOT NULL, object_id int NOT NULL, principal_id int, schema_id int NOT NULL,
    parent_object_id int NOT NULL, type char(2), type_desc nvarchar(60), create_date datetime NOT NULL,
    modify_date datetime NOT NULL, is_ms_shipped bit NOT NULL, is_published bit NOT NULL,
    is_schema_published bit NOT NULL
"""

_SYS = {
    "views": _OBJECT
    + """, is_replicated bit, has_replication_filter bit, has_opaque_metadata bit NOT NULL,
    has_unchecked_assembly_data bit NOT NULL, with_check_option bit NOT NULL,
    is_date_correlation_view bit NOT NULL, is_tracked_by_cdc bit, has_snapshot bit, ledger_view_type tinyint,
    ledger_view_type_desc nvarchar(60), is_dropped_ledger_view bit NOT NULL""",
    "procedures": _OBJECT
    + """, is_auto_executed bit NOT NULL, is_execution_replicated bit, is_repl_serializable_only bit,
    skips_repl_constraints bit""",
    "triggers": """
    name sysname NOT NULL, object_id int NOT NULL, parent_class tinyint NOT NULL, parent_class_desc nvarchar(60),
    parent_id int NOT NULL, type char(2) NOT NULL, type_desc nvarchar(60), create_date datetime NOT NULL,
    modify_date datetime NOT NULL, is_ms_shipped bit NOT NULL, is_disabled bit NOT NULL,
    is_not_for_replication bit NOT NULL, is_instead_of_trigger bit NOT NULL""",
    "foreign_keys": _OBJECT
    + """, referenced_object_id int, key_index_id int, is_disabled bit NOT NULL,
    is_not_for_replication bit NOT NULL, is_not_trusted bit NOT NULL, delete_referential_action tinyint,
    delete_referential_action_desc nvarchar(60), update_referential_action tinyint,
    update_referential_action_desc nvarchar(60), is_system_named bit NOT NULL""",
    "foreign_key_columns": """
    constraint_object_id int NOT NULL, constraint_column_id int NOT NULL, parent_object_id int NOT NULL,
    parent_column_id int NOT NULL, referenced_object_id int NOT NULL, referenced_column_id int NOT NULL""",
    "check_constraints": _OBJECT
    + """, is_disabled bit NOT NULL, is_not_for_replication bit NOT NULL, is_not_trusted bit NOT NULL,
    parent_column_id int NOT NULL, definition nvarchar(max), uses_database_collation bit,
    is_system_named bit NOT NULL""",
    "sql_modules": """
    object_id int NOT NULL, definition nvarchar(max), uses_ansi_nulls bit, uses_quoted_identifier bit,
    is_schema_bound bit, uses_database_collation bit, is_recompiled bit, null_on_null_input bit,
    execute_as_principal_id int, uses_native_compilation bit, inline_type bit, is_inlineable bit""",
}

_INFORMATION_SCHEMA = {
    "views": """
    TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME sysname NOT NULL,
    VIEW_DEFINITION nvarchar(4000), CHECK_OPTION varchar(7), IS_UPDATABLE varchar(2)""",
    "check_constraints": """
    CONSTRAINT_CATALOG nvarchar(128), CONSTRAINT_SCHEMA nvarchar(128), CONSTRAINT_NAME sysname NOT NULL,
    CHECK_CLAUSE nvarchar(4000)""",
    "referential_constraints": """
    CONSTRAINT_CATALOG nvarchar(128), CONSTRAINT_SCHEMA nvarchar(128), CONSTRAINT_NAME sysname NOT NULL,
    UNIQUE_CONSTRAINT_CATALOG nvarchar(128), UNIQUE_CONSTRAINT_SCHEMA nvarchar(128),
    UNIQUE_CONSTRAINT_NAME sysname, MATCH_OPTION varchar(7), UPDATE_RULE varchar(11), DELETE_RULE varchar(11)""",
    "view_table_usage": """
    VIEW_CATALOG nvarchar(128), VIEW_SCHEMA nvarchar(128), VIEW_NAME sysname NOT NULL,
    TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME sysname NOT NULL""",
    "view_column_usage": """
    VIEW_CATALOG nvarchar(128), VIEW_SCHEMA nvarchar(128), VIEW_NAME sysname NOT NULL,
    TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME sysname NOT NULL,
    COLUMN_NAME sysname""",
}


def _empty(columns: list[ResultColumn]) -> Callable[[Any, Any], Rowset]:
    def view(session: Any, db: Any) -> Rowset:
        return Rowset(columns, [])

    return view


EMPTY_SYS_VIEWS = {name: _empty(result_columns(spec)) for name, spec in _SYS.items()}
EMPTY_INFORMATION_SCHEMA_VIEWS = {
    name: _empty(result_columns(spec)) for name, spec in _INFORMATION_SCHEMA.items()
}
