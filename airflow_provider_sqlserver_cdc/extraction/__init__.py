"""
The extraction: everything that reads the source to produce windows, CDC and Change Tracking.

A floor above ``hooks``, ``parquet`` and ``state``, below ``snapshot`` and the operators
(docs/architecture.md, "Layers"): ``cdc_windows`` (plan one run's LSN windows and stream each into
Parquet plus a manifest), ``version_windows`` (the same for Change Tracking versions),
``instance_switch`` (a table's second capture instance), ``ddl_split`` (a DROP inside a window),
``blind_spot`` (rows changed before the new instance started), ``added_column_values`` (values of
columns added around a switch) and ``column_changes`` (the column history of a stream). The window
contract they write (``window/``) imports none of them.
"""
