"""The T-SQL engine: parsing, expressions, queries, DML, DDL, catalog views and system procedures."""

from __future__ import annotations
