"""RootCoord's user, role and privilege DDL (Milvus's RBAC) and the reads the servers
authenticate and authorize with: each request is checked against the meta, then executed
as one DDL event on the `ddl` topic (RootCoord._execute). Passwords arrive hashed
(vectorlog.core.passwords): rootcoord and the log never see one."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Any, Protocol

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.privilege_groups import (
    BUILTIN_GROUPS,
    DEFINED,
    check_alteration,
    check_group_name,
    check_same_level,
    check_v2_scope,
    object_type_of,
)
from vectorlog.core.rbac import ANY, Grant, check_grant, check_role_name, check_user_name
from vectorlog.processors.rootcoord.rbac_meta import RbacMeta


class _Meta(Protocol):
    @property
    def rbac(self) -> RbacMeta: ...


class _Executes(Protocol):
    """What the mixin needs of its class: the meta's RBAC state and the DDL machinery."""

    @property
    def meta(self) -> _Meta: ...

    def _ddl(self) -> contextlib.AbstractContextManager[None]: ...
    def _execute(self, event_type: str, collection_id: int, body: dict[str, Any]) -> int: ...


class RbacDdl:
    """The RBAC requests and reads of RootCoord (a mixin over its DDL machinery)."""

    # -- users ---------------------------------------------------------------------------
    def create_user(self: _Executes, name: str, password_hash: str, description: str = "") -> None:
        """Creates a user with a password hash. Raises InvalidArgument, RbacRefused."""
        check_user_name(name)
        with self._ddl():
            body = {"user_name": name, "password_hash": password_hash, "description": description}
            self._execute("UserCreated", 0, body)

    def alter_user(self: _Executes, name: str, description: str) -> None:
        """Replaces a user's description (update_user). Raises RbacRefused (no such user)."""
        with self._ddl():
            self.meta.rbac.user(name)
            self._execute("UserAltered", 0, {"user_name": name, "description": description})

    def update_password(self: _Executes, name: str, password_hash: str) -> None:
        """Replaces a user's password hash. Raises RbacRefused (no such user)."""
        with self._ddl():
            self.meta.rbac.user(name)
            body = {"user_name": name, "password_hash": password_hash}
            self._execute("UserPasswordUpdated", 0, body)

    def drop_user(self: _Executes, name: str) -> None:
        """Drops a user and its memberships; a missing one is a no-op, as Milvus. Raises
        RbacRefused (root)."""
        with self._ddl():
            if name != "root" and name not in self.meta.rbac.users:
                return
            self._execute("UserDropped", 0, {"user_name": name})

    # -- roles ---------------------------------------------------------------------------
    def create_role(self: _Executes, name: str, description: str = "") -> None:
        check_role_name(name)
        with self._ddl():
            self._execute("RoleCreated", 0, {"role_name": name, "description": description})

    def alter_role(self: _Executes, name: str, description: str) -> None:
        """Replaces a role's description. Raises RbacRefused (no such role)."""
        with self._ddl():
            self.meta.rbac.role(name)
            self._execute("RoleAltered", 0, {"role_name": name, "description": description})

    def role_description(self: _Executes, name: str) -> str:
        """Returns a role's description. Raises RbacRefused (no such role)."""
        return str(self.meta.rbac.role(name).get("description") or "")

    def drop_role(self: _Executes, name: str, force_drop: bool = False) -> None:
        """Drops a role, its memberships and (with `force_drop`) its grants. Raises
        RbacRefused (a default role, one with grants and no force_drop, none such)."""
        with self._ddl():
            self._execute("RoleDropped", 0, {"role_name": name, "force_drop": bool(force_drop)})

    def grant_role(self: _Executes, user: str, role: str) -> None:
        """Grants `role` to `user` (again: a no-op). Raises RbacRefused (either missing)."""
        with self._ddl():
            self.meta.rbac.user(user)
            if role not in self.meta.rbac.roles_of(user):
                self._execute("UserRoleGranted", 0, {"user_name": user, "role_name": role})

    def revoke_role(self: _Executes, user: str, role: str) -> None:
        with self._ddl():
            self.meta.rbac.user(user)
            self.meta.rbac.role(role)
            if role in self.meta.rbac.roles_of(user):
                self._execute("UserRoleRevoked", 0, {"user_name": user, "role_name": role})

    # -- privileges ----------------------------------------------------------------------
    def grant_privilege(self: _Executes, grant: dict[str, Any]) -> None:
        """Grants a privilege ({role_name, object_type, object_name, db_name, privilege,
        grantor}); granting it again is a no-op. Raises InvalidArgument (Milvus's "not
        found the privilege name"), RbacRefused (no such role)."""
        with self._ddl():
            g = _checked(grant, self.meta.rbac.custom_groups())
            self.meta.rbac.role(g.role)
            if _held(self.meta, g) is None:
                self._execute("PrivilegeGranted", 0, _body(g))

    def revoke_privilege(self: _Executes, grant: dict[str, Any]) -> None:
        with self._ddl():
            g = _checked(grant, self.meta.rbac.custom_groups())
            self.meta.rbac.role(g.role)
            held = _held(self.meta, g)
            if held is not None:  # revoking a privilege the role lacks: a no-op, as Milvus
                self._execute("PrivilegeRevoked", 0, _body(held))

    # -- privilege groups ----------------------------------------------------------------
    def create_privilege_group(self: _Executes, name: str) -> None:
        """Creates an empty custom privilege group. Raises InvalidArgument (a bad name, one
        in use by a group, privilege or built-in group)."""
        check_group_name(name)
        with self._ddl():
            self._execute("PrivilegeGroupCreated", 0, {"group_name": name})

    def drop_privilege_group(self: _Executes, name: str) -> None:
        """Drops a custom privilege group; a missing or built-in one is a no-op. Raises
        InvalidArgument (a role holds a grant of it)."""
        check_group_name(name)
        with self._ddl():
            if name in self.meta.rbac.groups:
                self._execute("PrivilegeGroupDropped", 0, {"group_name": name})

    def operate_privilege_group(
        self: _Executes, name: str, privileges: list[str], add: bool
    ) -> None:
        """Adds `privileges` to (or, not `add`, removes them from) custom group `name`.
        Raises InvalidArgument (no such group, no or unknown privileges, mixed levels)."""
        check_group_name(name)
        with self._ddl():
            custom = self.meta.rbac.custom_groups()
            check_alteration(name, privileges, custom)
            if add:
                check_same_level([*privileges, *custom[name]])
            body = {"group_name": name, "added": [], "removed": []}
            body["added" if add else "removed"] = sorted(set(privileges))
            self._execute("PrivilegeGroupAltered", 0, body)

    def list_privilege_groups(self: _Executes) -> dict[str, list[str]]:
        """Returns the custom groups' privileges by name, then the built-in groups'."""
        return self.meta.rbac.custom_groups() | {k: list(v) for k, v in BUILTIN_GROUPS.items()}

    # -- reads ---------------------------------------------------------------------------
    def list_users(self: _Executes) -> list[str]:
        return sorted(self.meta.rbac.users)

    def describe_user(self: _Executes, name: str) -> dict[str, Any]:
        """Returns {"user_name", "roles", "description"}. Raises RbacRefused (no such user)."""
        description = self.meta.rbac.user(name).get("description") or ""
        return {
            "user_name": name,
            "roles": self.meta.rbac.roles_of(name),
            "description": description,
        }

    def list_roles(self: _Executes) -> list[str]:
        return sorted(self.meta.rbac.roles)

    def describe_role(self: _Executes, name: str) -> list[dict[str, Any]]:
        """Returns the role's grants as dicts. Raises RbacRefused (no such role)."""
        self.meta.rbac.role(name)
        return [asdict(g) for g in self.meta.rbac.grants_of(name)]

    def password_hash(self: _Executes, name: str) -> str | None:
        """Returns the user's password hash (None: root's default password). Raises
        RbacRefused (no such user)."""
        hashed: str | None = self.meta.rbac.user(name)["password_hash"]
        return hashed

    def access_of(self: _Executes, name: str) -> dict[str, Any]:
        """Returns {"roles", "grants"} of a user: its roles and every grant they hold
        (public's included). Raises RbacRefused (no such user)."""
        rbac = self.meta.rbac
        rbac.user(name)
        roles = rbac.roles_of(name)
        grants = [asdict(g) for r in [*roles, "public"] for g in rbac.grants_of(r)]
        return {"roles": roles, "grants": grants, "groups": rbac.custom_groups()}


def _held(meta: _Meta, g: Grant) -> Grant | None:
    """Returns the grant the role holds that is `g` whoever granted it, or None."""
    same = (g.role, g.object_type, g.object_name, g.db_name, g.privilege)
    for h in meta.rbac.grants:
        if (h.role, h.object_type, h.object_name, h.db_name, h.privilege) == same:
            return h
    return None


def _checked(grant: dict[str, Any], custom: dict[str, list[str]]) -> Grant:
    """Returns the Grant of a request (`grant["v2"]`: grant_privilege_v2's, whose object
    type follows from its privilege or group). Raises InvalidArgument (a field missing, an
    unknown object type or privilege, a group where v1 takes none, a scope the group's
    level does not take)."""
    if grant.get("v2"):
        return _checked_v2(grant, custom)
    privilege = str(grant.get("privilege"))
    if privilege in custom:
        raise InvalidArgument(f"can not operate the custom privilege group [{privilege}]")
    if privilege in BUILTIN_GROUPS:
        raise InvalidArgument(f"can not operate the built-in privilege group [{privilege}]")
    try:
        g = Grant(
            str(grant["role_name"]),
            str(grant["object_type"]),
            str(grant.get("object_name") or ANY),
            str(grant.get("db_name") or "default"),
            str(grant["privilege"]),
            str(grant.get("grantor") or "root"),
        )
    except KeyError as exc:
        raise InvalidArgument(f"a grant needs {exc.args[0]}") from None
    check_grant(g.object_type, g.privilege)
    return g


def _body(g: Grant) -> dict[str, Any]:
    return {
        "role_name": g.role,
        "object_type": g.object_type,
        "object_name": g.object_name,
        "db_name": g.db_name,
        "privilege": g.privilege,
        "grantor": g.grantor,
    }


def _checked_v2(grant: dict[str, Any], custom: dict[str, list[str]]) -> Grant:
    """Returns the Grant of a grant/revoke_privilege_v2 request (Milvus's
    isValidPrivilegeV2 and validatePrivilegeGroupParams). Raises InvalidArgument."""
    privilege = str(grant.get("privilege") or "")
    if privilege != ANY and privilege not in custom and privilege not in DEFINED:
        raise InvalidArgument(f"not found the privilege name[{privilege}]")
    db_name = str(grant.get("db_name") or "default")
    collection = str(grant.get("object_name") or ANY)
    check_v2_scope(privilege, db_name, collection, custom)
    return Grant(
        str(grant["role_name"]),
        object_type_of(privilege),
        collection,
        db_name,
        privilege,
        str(grant.get("grantor") or "root"),
    )
