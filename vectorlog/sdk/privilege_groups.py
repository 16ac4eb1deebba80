"""The Client's privilege-group calls (MilvusClient's): create, drop and list privilege
groups, add privileges to and remove them from a group, and grant or revoke a privilege or
group on a database and collection (grant_privilege_v2). Each change is a DDL event on the
log; `vectorlog serve --authorization` enforces what a granted group holds."""

from __future__ import annotations

from typing import Any

from vectorlog.processors.proxy.service import ProxyService


class PrivilegeGroupCalls:
    """Privilege-group calls of a Client (which sets `_proxy` and `db`)."""

    _proxy: ProxyService
    db: str

    def create_privilege_group(self, group_name: str, **kwargs: Any) -> None:
        """Creates an empty custom group. Raises InvalidArgument (a bad name, or the name of
        a group, privilege or built-in group)."""
        self._proxy.credentials.create_privilege_group(group_name)

    def drop_privilege_group(self, group_name: str, **kwargs: Any) -> None:
        """Drops a custom group (a missing one: no-op). Raises InvalidArgument (a role holds
        a grant of it: revoke that first)."""
        self._proxy.credentials.drop_privilege_group(group_name)

    def list_privilege_groups(self, **kwargs: Any) -> list[dict[str, Any]]:
        """Returns [{"privilege_group", "privileges"}] of the custom groups, then the nine
        built-in ones (ClusterReadOnly ... CollectionAdmin), as MilvusClient."""
        groups = self._proxy.credentials.list_privilege_groups()
        return [{"privilege_group": k, "privileges": tuple(v)} for k, v in groups.items()]

    def add_privileges_to_group(
        self, group_name: str, privileges: list[str], **kwargs: Any
    ) -> None:
        """Adds privileges (Milvus's names, or groups) to a custom group. Raises
        InvalidArgument (no such group, an unknown privilege, mixed privilege levels)."""
        self._proxy.credentials.operate_privilege_group(group_name, list(privileges), True)

    def remove_privileges_from_group(
        self, group_name: str, privileges: list[str], **kwargs: Any
    ) -> None:
        """Removes privileges from a custom group. Raises InvalidArgument."""
        self._proxy.credentials.operate_privilege_group(group_name, list(privileges), False)

    def grant_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        grantor: str = "root",
        **kwargs: Any,
    ) -> None:
        """Grants a privilege or privilege group to a role on `collection_name` (`*`: every
        one) of database `db_name` (None: this client's). Raises InvalidArgument (Milvus's
        "not found the privilege name", a scope the group's level does not take),
        RbacRefused (no such role)."""
        grant = _v2(role_name, privilege, collection_name, db_name or self.db)
        self._proxy.credentials.grant_privilege(grant | {"grantor": grantor})

    def revoke_privilege_v2(
        self,
        role_name: str,
        privilege: str,
        collection_name: str,
        db_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Revokes a grant_privilege_v2 grant (one the role lacks: no-op). Raises as
        grant_privilege_v2."""
        grant = _v2(role_name, privilege, collection_name, db_name or self.db)
        self._proxy.credentials.revoke_privilege(grant)


def _v2(role: str, privilege: str, collection: str, db_name: str) -> dict[str, Any]:
    """Returns the grant request of a grant/revoke_privilege_v2 call."""
    return {
        "role_name": role,
        "privilege": privilege,
        "object_name": collection,
        "db_name": db_name,
        "v2": True,
    }
