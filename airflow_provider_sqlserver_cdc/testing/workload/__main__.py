"""Run the workload command line: ``python -m airflow_provider_sqlserver_cdc.testing.workload``."""

from __future__ import annotations

import sys

from airflow_provider_sqlserver_cdc.testing.workload.command_line import main

sys.exit(main())
