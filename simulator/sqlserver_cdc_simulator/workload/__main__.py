"""Run the workload command line: ``python -m sqlserver_cdc_simulator.workload``."""

from __future__ import annotations

import sys

from sqlserver_cdc_simulator.workload.command_line import main

sys.exit(main())
