"""LOB values over ``max text repl size`` on a CDC-enabled table fail with error 7139, as SQL Server's do.

Follows docs/database-engine/configure-windows/configure-the-max-text-repl-size-server-configuration-option.md
(default 65,536 bytes, -1 for no limit; applies to CDC-enabled tables) and error 7139's text. The
simulator applies ``sp_configure`` at once; SQL Server at ``RECONFIGURE`` (run here as well).
"""

from __future__ import annotations

import pyodbc
import pytest

from sqlserver_cdc_simulator.cdc.lob_limit import DEFAULT

TABLE = (
    "CREATE TABLE dbo.docs (id int NOT NULL PRIMARY KEY, body nvarchar(max) NULL, blob varbinary(max) NULL)"
)


def configure(cdc_db, value: int) -> None:
    cdc_db.execute(f"EXEC sp_configure 'max text repl size', {value}").close()
    cdc_db.execute("RECONFIGURE").close()


def test_lob_over_the_limit_fails_with_7139_only_on_a_cdc_enabled_table(cdc_db, error_number):
    cdc_db.execute(TABLE).close()
    big = "x" * (DEFAULT // 2 + 1)  # nvarchar: two bytes a character, one byte over the limit
    cdc_db.execute("INSERT INTO dbo.docs (id, body) VALUES (1, ?)", big).close()  # not tracked yet: fine
    cdc_db.enable_table("docs")
    for statement, params in (
        ("INSERT INTO dbo.docs (id, body) VALUES (2, ?)", (big,)),
        ("UPDATE dbo.docs SET blob = ? WHERE id = 1", (b"\0" * (DEFAULT + 1),)),
    ):
        with pytest.raises(pyodbc.Error) as excinfo:
            cdc_db.execute(statement, *params).close()
        assert error_number(excinfo) == 7139
        assert "max text repl size" in str(excinfo.value)
    assert cdc_db.scalar("SELECT COUNT(*) FROM dbo.docs") == 1  # the failed insert wrote nothing
    cdc_db.execute(
        "INSERT INTO dbo.docs (id, body) VALUES (3, ?)", "x" * (DEFAULT // 2)
    ).close()  # at the limit

    configure(cdc_db, -1)
    try:
        cdc_db.execute("INSERT INTO dbo.docs (id, body) VALUES (2, ?)", big).close()
    finally:
        configure(cdc_db, DEFAULT)
    assert cdc_db.scalar("SELECT COUNT(*) FROM dbo.docs") == 3
