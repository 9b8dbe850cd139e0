"""
The reconcile comparison's shared pieces (docs/reconcile.md): its defaults, and the row digests and key
ranges both sides compute alike (``digest``). Standard library only: the Spark job imports them too.
"""

from __future__ import annotations

#: Source rows per leaf: the finest key range compared, and what a repair reads per differing leaf.
DEFAULT_LEAF_ROWS = 10_000
#: Differing leaves compared key by key (and repaired) per run at most; the rest is counted.
DEFAULT_DETAIL_LEAVES = 200
#: Differing keys listed in the log and the XCom at most.
DEFAULT_MAX_REPORTED_KEYS = 100
