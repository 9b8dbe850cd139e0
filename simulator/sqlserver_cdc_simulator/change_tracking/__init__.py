"""Change Tracking for the SQL Server simulator, following SQL Server 2022's documented behaviour.

``ALTER DATABASE … SET CHANGE_TRACKING``, ``ALTER TABLE … ENABLE / DISABLE CHANGE_TRACKING``,
``CHANGETABLE(CHANGES …)`` / ``CHANGETABLE(VERSION …)``, the ``CHANGE_TRACKING_*`` functions, the
catalog views and retention cleanup. Versions are assigned inside the engine's commit, so a reader
sees a transaction's rows and its change tracking version together or not at all
(:mod:`.recording`). The net-change rules are plain Python in :mod:`.state`.
"""

from __future__ import annotations
