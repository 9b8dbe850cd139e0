"""What CDC needs from the engine's session and database objects, in one place.

Every access to engine internals (current database, server, clock, principals, catalog flags)
goes through these functions, so the rest of the CDC package depends only on them.
"""

from __future__ import annotations

from typing import Any

from sqlserver_cdc_simulator.cdc.database_state import CdcDatabase
from sqlserver_cdc_simulator.storage import Principal, Schema

_STATE_KEY = "cdc"
_JOB_KEY = "cdc_capture_job"


def current_database(session: Any) -> Any:
    """The session's current database object."""
    return session.current_db()


def database_object(session: Any, database: Any) -> Any:
    """A database object from either a database object or a database name."""
    if isinstance(database, str):
        return server_of(session).database(database)
    return database if database is not None else current_database(session)


def server_of(session: Any) -> Any:
    """The engine (server) of a session."""
    return session.engine


def commit_lock_of(server: Any) -> Any:
    """The lock the engine holds while it assigns commit LSNs and appends to the log."""
    return server.mutex


def clock_of(session: Any) -> Any:
    """The server clock."""
    return server_of(session).clock


def databases_of(server: Any) -> list[Any]:
    """Every database of the server."""
    return list(server.databases.values())


def cdc_state(database: Any) -> CdcDatabase | None:
    """The CDC state of a database, or None when CDC is not enabled on it."""
    state = database.flags.get(_STATE_KEY)
    if state is not None and state.pending_job_start is not None:
        start, state.pending_job_start = state.pending_job_start, None
        start()
    return state


def set_cdc_state(database: Any, state: CdcDatabase | None) -> None:
    """Attach (or detach, with None) the CDC state and update ``sys.databases.is_cdc_enabled``."""
    if state is None:
        database.flags.pop(_STATE_KEY, None)
        database.flags["is_cdc_enabled"] = False
    else:
        database.flags[_STATE_KEY] = state
        database.flags["is_cdc_enabled"] = True


def capture_job_of(database: Any) -> Any:
    """The database's running-or-stopped :class:`~.capture_job.CaptureJob`, if created."""
    return database.flags.get(_JOB_KEY)


def set_capture_job(database: Any, job: Any) -> None:
    """Remember (or forget, with None) the database's capture job."""
    if job is None:
        database.flags.pop(_JOB_KEY, None)
    else:
        database.flags[_JOB_KEY] = job


def set_tracked(table: Any, tracked: bool) -> None:
    """Set ``sys.tables.is_tracked_by_cdc``."""
    table.flags["is_tracked_by_cdc"] = tracked


def login_name(session: Any) -> str:
    """The session's login name."""
    return session.login.name


def is_sysadmin(session: Any) -> bool:
    """Whether the session's login is in the sysadmin server role."""
    return bool(session.login.is_sysadmin)


def database_user(session: Any, database: Any) -> str | None:
    """The database user the session's login maps to in ``database`` (lower case), if any."""
    if is_sysadmin(session):
        return "dbo"
    login = login_name(session).lower()
    for key, principal in database.principals.items():
        if principal.type != "R" and (principal.login or "").lower() == login:
            return key
    return None


def is_role_member(session: Any, database: Any, role: str) -> bool:
    """Whether the session's user is a member of database role ``role`` (dbo and sysadmin always are)."""
    user = database_user(session, database)
    if user is None:
        return False
    if user == "dbo":
        return True
    principal = database.principals.get(role.lower())
    return principal is not None and principal.type == "R" and user in principal.members


def is_db_owner(session: Any, database: Any) -> bool:
    """Whether the session is sysadmin, the dbo, or a member of db_owner."""
    return is_sysadmin(session) or is_role_member(session, database, "db_owner")


def ensure_role(database: Any, role: str) -> None:
    """Create database role ``role`` if it does not exist (as ``sp_cdc_enable_table`` does)."""
    key = role.lower()
    if key in database.principals:
        return
    principal_id = database.next_principal_id
    database.next_principal_id += 1
    database.principals[key] = Principal(principal_id, role, "R")


def ensure_cdc_schema(database: Any) -> None:
    """Create the ``cdc`` schema (owned by the ``cdc`` user) if missing."""
    if database.schema("cdc") is not None:
        return
    if "cdc" not in database.principals:
        principal_id = database.next_principal_id
        database.next_principal_id += 1
        database.principals["cdc"] = Principal(principal_id, "cdc", "S", default_schema="cdc")
    schema_id = database.next_schema_id
    database.next_schema_id += 1
    database.schemas["cdc"] = Schema(schema_id, "cdc", database.principals["cdc"].principal_id)


def drop_cdc_schema(database: Any) -> None:
    """Remove the ``cdc`` schema and user."""
    database.schemas.pop("cdc", None)
    database.principals.pop("cdc", None)


def has_foreign_cdc_schema(database: Any) -> bool:
    """Whether a schema or user named ``cdc`` exists although CDC is not enabled (error 22906)."""
    return cdc_state(database) is None and (
        database.schema("cdc") is not None or "cdc" in database.principals
    )
