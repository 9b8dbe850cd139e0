"""The table maintenance job: Iceberg's own procedures on the provider's target tables, keeping their applied state.

Modules: ``arguments`` (command line, thresholds), ``table_health`` (figures read from Iceberg's
metadata tables), ``procedures`` (the Iceberg procedures it calls), ``tombstones`` (the optional
purge of old soft-deleted rows), ``job`` (the run). See docs/maintenance.md.
"""
