"""Change Data Capture for the SQL Server simulator, following SQL Server 2022's documented behaviour.

The pieces that do not depend on the T-SQL engine (LSN arithmetic, update masks, net changes, the
LSN/time mapping, retention) live in their own modules and are unit tested on their own; the
capture job and the system objects are registered into the engine by :mod:`.registration`.
"""

from __future__ import annotations
