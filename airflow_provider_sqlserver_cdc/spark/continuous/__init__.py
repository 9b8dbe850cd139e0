"""The continuous apply job: one long-running Spark application that merges windows as they land (docs/continuous-apply.md)."""
