"""The module-scoped simulator the client batteries share (see client_battery_support)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from client_battery_support import DATABASE, PASSWORD, SETUP, SETUP_IN_DATABASE, ClientSimulator

from sqlserver_cdc_simulator import start_simulator
from sqlserver_cdc_simulator.cdc.registration import run_capture_scan
from sqlserver_cdc_simulator.tds.tls import self_signed_certificate


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A battery class's ``test_check_outcome`` runs once per check of its ``outcomes()``."""
    if "check" in metafunc.fixturenames and metafunc.cls is not None:
        metafunc.parametrize("check", list(metafunc.cls.outcomes()))


@pytest.fixture(scope="module")
def client_simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientSimulator]:
    server = start_simulator(PASSWORD)
    engine: Any = server.engine
    for sql in SETUP:
        engine.execute(sql)
    for sql in SETUP_IN_DATABASE:
        engine.execute(sql, database=DATABASE)
    run_capture_scan(engine, DATABASE)
    certificate = tmp_path_factory.mktemp("tls") / "simulator.pem"
    certificate.write_bytes(self_signed_certificate()[0])
    try:
        yield ClientSimulator(server, certificate)
    finally:
        server.stop()
        engine.close()
