"""pytest plugin registered by the package (entry point ``pytest11``).

Fixtures that start the SQL Server simulator are added here by the simulator package.
"""

from __future__ import annotations
