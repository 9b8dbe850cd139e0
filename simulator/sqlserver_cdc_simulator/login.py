"""A server login: name, password, default database and server-level permissions."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Login:
    """A server login."""

    name: str
    password: str
    principal_id: int
    default_database: str = "master"
    is_sysadmin: bool = False
    disabled: bool = False
    sid: bytes = b""
    server_permissions: set[str] = field(default_factory=set)  # e.g. {"VIEW SERVER STATE"}

    def has_server_permission(self, permission: str) -> bool:
        """sysadmin has every server permission; others need a GRANT."""
        if self.is_sysadmin:
            return True
        if permission == "VIEW SERVER STATE" and "VIEW SERVER PERFORMANCE STATE" in self.server_permissions:
            return True
        return permission in self.server_permissions
