"""The provider's exceptions: each says what is wrong, where, and what to do."""

from __future__ import annotations

from airflow.exceptions import AirflowException

# One class per error, so that a caller can catch each: the classes are alike in form only.


class SqlServerCdcError(AirflowException):
    """Base class of every error the provider raises on purpose."""


class InvalidIdentifierError(SqlServerCdcError, ValueError):
    """A capture-instance, schema or table name that SQL Server would not accept."""


class SqlServerLoginError(SqlServerCdcError):
    """
    The server refused the login (wrong user or password, or the database is not accessible), or is unreachable.

    :param message: what happened and what to check.
    :param refused: the server answered and refused the login (not a network or driver failure).
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class DriverNotAllowedError(SqlServerCdcError):
    """A connection names its ODBC driver in its extra, which the Airflow configuration does not allow."""


class CdcNotEnabledError(SqlServerCdcError):
    """Change data capture is not enabled on the database, or not on the table."""


class CaptureInstanceNotFoundError(SqlServerCdcError):
    """The capture instance does not exist in the database."""


class ChangeDataPermissionError(SqlServerCdcError):
    """The login may not read the change data (gating role of the capture instance, or SELECT permission)."""


class RetentionGapError(SqlServerCdcError):
    """
    The window starts below the capture instance's low-water mark: those changes were cleaned up.

    The table must be re-snapshotted; the changes cannot be recovered from CDC.
    """

    def __init__(self, message: str, *, capture_instance: str, from_lsn: str, min_lsn: str) -> None:
        super().__init__(message)
        self.capture_instance = capture_instance
        self.from_lsn = from_lsn
        self.min_lsn = min_lsn


class ContiguityGapError(SqlServerCdcError):
    """
    Changes between what the target holds and a run's window are not applied (missed intervals).

    Raised before anything is written when ``on_gap="fail"``; the message names the gap and the backfill.
    """

    def __init__(self, message: str, *, gap: dict[str, object]) -> None:
        super().__init__(message)
        self.gap = gap


class SchemaChangeError(SqlServerCdcError):
    """A DDL on the source table makes its capture instance miss or change data (window.schema_drift)."""


class UnsupportedTypeError(SqlServerCdcError):
    """A captured column has a type (or a value) the provider cannot write to Parquet faithfully."""


class LsnRangeError(SqlServerCdcError):
    """SQL Server rejected an LSN range (error 313) for a reason other than retention."""


class NoKeyColumnsError(SqlServerCdcError):
    """The capture instance has no key columns (no primary key and no @index_name), but one is needed."""


class WatermarkMissingError(SqlServerCdcError):
    """Watermark mode needs a stored LSN for the capture instance and there is none."""


class WindowNotReadyError(SqlServerCdcError):
    """The capture job has not yet processed every transaction the window needs."""


class LocalPathError(SqlServerCdcError, ValueError):
    """A local staging or warehouse path, with an executor whose workers do not share the filesystem."""


class RetentionHeadroomError(SqlServerCdcError):
    """The CDC cleanup may soon delete (or has deleted) changes the target has not applied (time to loss)."""


class CaptureInstanceRunError(SqlServerCdcError):
    """Some capture instances of a run were not merged (their task failed); the others were merged and committed."""
