"""Extract ``dbo_orders`` of connection ``sim`` (the simulator) for a data interval, by the library itself."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from server_clock import utc

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_windows
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def extract(tmp_path: Path, start: dt.datetime | None = None, end: dt.datetime | None = None, **options):
    """
    The windows of ``dbo_orders`` for ``[start, end)``, by default 10:00-11:00 server time, under ``tmp_path/lake``.

    :param options: further keyword arguments of ``extract_windows``.
    """
    hook = SqlServerCdcHook("sim")
    try:
        return extract_windows(
            hook,
            ["dbo_orders"],
            conn_id="sim",
            base_uri=str(tmp_path / "lake"),
            data_interval_start=start or utc(10, 0),
            data_interval_end=end or utc(11, 0),
            **options,
        )
    finally:
        hook.close()
