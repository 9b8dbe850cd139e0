"""SqlServerCdcHook behaviour that needs no server: a refused connection."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.errors import SqlServerLoginError
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def test_connection_failure_is_clear_and_hides_the_password(conn_env, secret):
    hook = SqlServerCdcHook(conn_env(driver="FreeTDS"))
    hook.connection.host = "127.0.0.1"
    hook.connection.port = 1  # nothing listens there
    with pytest.raises(SqlServerLoginError) as info:
        hook.get_conn()
    assert "127.0.0.1:1" in str(info.value) and "'cdc_src'" in str(info.value)
    assert secret not in str(info.value)
