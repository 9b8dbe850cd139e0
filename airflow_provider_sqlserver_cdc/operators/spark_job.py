"""SparkJobOperator: spark-submit one of the provider's Spark jobs, its modules shipped along as ``py_files``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_sqlserver_cdc.spark import with_job_modules

if TYPE_CHECKING:
    from airflow.sdk import Context


class SparkJobOperator(SparkSubmitOperator):
    """
    The base of the operators that spark-submit the provider's jobs (merge, maintenance, reconcile, continuous apply).

    Spark settings are ``SparkSubmitOperator``'s (``conn_id``, ``conf``, ``jars``, ``packages``,
    ``deploy_mode``...): the Iceberg runtime jar, ``spark.sql.extensions`` and the target catalog's
    ``spark.sql.catalog.*``, or the cluster's defaults.

    :param ship_job_modules: add the zip of the job's modules to ``py_files`` (default, built when the
        task runs); False when the cluster's Python has this provider installed, at the same version.
    """

    #: The job's application file (``spark/*_job.py``) and spark-submit's default ``name``.
    job_path: ClassVar[str]
    job_name: ClassVar[str]

    def __init__(self, *, ship_job_modules: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("name", self.job_name)
        super().__init__(application=self.job_path, **kwargs)
        self.ship_job_modules = ship_job_modules

    def submit_job(
        self,
        context: Context,
        arguments: list[str],
        *,
        application: str | None = None,
        name: str | None = None,
    ) -> None:
        """
        Run spark-submit of the job with ``arguments``; wait until it ends, fail when it fails.

        :param context: the task's context.
        :param arguments: the job's command line.
        :param application: another of the provider's jobs than ``job_path`` (the reconcile's repair merge).
        :param name: spark-submit's ``--name`` of that job.
        """
        self.application_args = arguments
        self.application = application or self.application
        self.name = name or self.name
        if self.ship_job_modules:
            self.py_files = with_job_modules(self.py_files)
            self.log.info("Shipping the job's modules as py_files: %s", self.py_files)
        self._hook = None  # the hook holds one job's command line: a new one per job
        SparkSubmitOperator.execute(self, context)
