#!/usr/bin/env bash
# Create the sample database on the compose SQL Server, enable CDC on it and on its tables
# and allow snapshot isolation (for the initial snapshot),
# using the same sample schema as `make demo` (sqlserver_cdc_simulator.workload).
# The password comes from the environment only.
set -euo pipefail
export SQLSERVER_CDC_ODBC="DRIVER={ODBC Driver 18 for SQL Server};SERVER=sqlserver,1433;UID=sa;PWD={${MSSQL_SA_PASSWORD}};TrustServerCertificate=yes"
python -m sqlserver_cdc_simulator.workload create --database cdc_sample
# The initial snapshot reads under SNAPSHOT isolation (docs/snapshot.md).
python - <<'PY'
import os

import pyodbc

conn = pyodbc.connect(os.environ["SQLSERVER_CDC_ODBC"], autocommit=True)
conn.execute("ALTER DATABASE [cdc_sample] SET ALLOW_SNAPSHOT_ISOLATION ON")
print("snapshot isolation allowed in cdc_sample", flush=True)
PY
