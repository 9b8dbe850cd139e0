"""Registration of every CDC object into the simulator's extension registry."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.testing.simulator.cdc import catalog, functions
from airflow_provider_sqlserver_cdc.testing.simulator.cdc.procedures import CdcProcedures, ddl_hook
from airflow_provider_sqlserver_cdc.testing.simulator.extensions import ExtensionRegistry


def register_cdc(registry: ExtensionRegistry) -> None:
    """Add the CDC procedures, functions, tables, views and DDL rules to ``registry``."""

    def register_change_table(name: str) -> None:
        table_name = name.split(".", 1)[1]
        if registry.find_view(name) is None:
            registry.view(name, lambda session, database: catalog.change_table(session, database, table_name))

    for name, procedure in CdcProcedures(register_change_table).procedures().items():
        registry.procedure(name, procedure)
    for name, (fn, returns) in functions.SCALAR_FUNCTIONS.items():
        registry.scalar_function(name, fn, returns)
    for prefix, fn in functions.TABLE_FUNCTION_PREFIXES.items():
        registry.table_function_prefix(prefix, fn)
    for name, view in catalog.STATIC_VIEWS.items():
        registry.view(name, view)
    registry.ddl_hook(ddl_hook)
