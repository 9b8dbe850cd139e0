"""
The window contract: what one run extracts, the files it writes and the XCom it hands on.

Modules: ``change_window`` (the window that flows sensor -> extract -> merge -> watermark, its
XCom form and the watermark key), ``planning`` (which LSN range a run extracts), ``contiguity``
(the guard against a gap before a window), ``schema_drift`` (DDL that changes what a capture
instance captures), ``manifest`` (the ``_manifest.json`` format and its one validation),
``lsn_ranges`` (applied LSN ranges) and ``net_effect`` (operation codes and the net-effect rule).
The extraction that writes windows is the package above (``extraction``). This package file imports
nothing, so that importing one light module (e.g. ``change_window``) never pulls in pyarrow,
Airflow or PySpark; ``manifest``, ``lsn_ranges`` and ``net_effect`` use only the standard library,
as the merge job imports them on the cluster.
"""
