"""The users, roles, role memberships and privilege grants of the meta table (Milvus's
RBAC), as derived state of the `ddl` topic's user and role events. MetaTable routes their
events and keys here.

Key layout (under the SnapshotKV namespace):
    USER_KEY + u                 -> JSON {name, password_hash, description, created_ts};
                                    `root` exists without one (Milvus's default password)
                                    until updated
    ROLE_KEY + r                 -> JSON {name, description, created_ts}; admin and public
                                    always exist
    MEMBER_KEY + u/r             -> user u has role r
    GRANT_KEY + r/type/db/object/privilege -> JSON grant (vectorlog.core.rbac.Grant)
    GROUP_KEY + g                -> JSON {name, privileges (sorted), created_ts}: a custom
                                    privilege group (core/privilege_groups.py)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from vectorlog.core.errors import InvalidArgument, RbacRefused
from vectorlog.core.privilege_groups import BUILTIN_GROUPS, DEFINED
from vectorlog.core.rbac import DEFAULT_ROLES, PUBLIC_GRANTS, ROOT_USER, Grant
from vectorlog.schemas.serde import Event

USER_KEY, ROLE_KEY, MEMBER_KEY, GRANT_KEY = "user/", "role/", "user-role/", "grant/"
GROUP_KEY = "privilege-group/"
PREFIXES = (USER_KEY, ROLE_KEY, MEMBER_KEY, GRANT_KEY, GROUP_KEY)
Writes = tuple[dict[str, bytes], list[str]]
USER_NOT_FOUND = "not found the user, maybe the user isn't existed or internal system error"
ROLE_NOT_FOUND = "not found the role, maybe the role isn't existed or internal system error"


def _dump(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def grant_key(g: Grant) -> str:
    return f"{GRANT_KEY}{g.role}/{g.object_type}/{g.db_name}/{g.object_name}/{g.privilege}"


def grant_of(body: dict[str, Any]) -> Grant:
    """Returns the Grant a PrivilegeGranted/Revoked event body names."""
    return Grant(
        body["role_name"],
        body["object_type"],
        body["object_name"],
        body["db_name"],
        body["privilege"],
        body.get("grantor") or ROOT_USER,
    )


def root_record() -> dict[str, Any]:
    return {"name": ROOT_USER, "password_hash": None, "created_ts": 0}


class RbacMeta:
    """The latest users, roles, memberships and grants (MetaTable keeps their history)."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {ROOT_USER: root_record()}
        self.roles: dict[str, dict[str, Any]] = {
            r: {"name": r, "created_ts": 0} for r in DEFAULT_ROLES
        }
        self.members: set[tuple[str, str]] = set()
        self.grants: set[Grant] = set()
        self.groups: dict[str, dict[str, Any]] = {}
        self.appliers: dict[str, Callable[[Event], Writes]] = {
            "UserCreated": self._user_created,
            "UserPasswordUpdated": self._password_updated,
            "UserDropped": self._user_dropped,
            "UserAltered": self._user_altered,
            "RoleAltered": self._role_altered,
            "RoleCreated": self._role_created,
            "RoleDropped": self._role_dropped,
            "UserRoleGranted": self._member_added,
            "UserRoleRevoked": self._member_removed,
            "PrivilegeGranted": self._granted,
            "PrivilegeRevoked": self._revoked,
            "PrivilegeGroupCreated": self._group_created,
            "PrivilegeGroupDropped": self._group_dropped,
            "PrivilegeGroupAltered": self._group_altered,
        }

    # -- reads ----------------------------------------------------------------------------
    def user(self, name: str) -> dict[str, Any]:
        """Returns the user's record. Raises RbacRefused (Milvus's "not found the user")."""
        rec = self.users.get(name)
        if rec is None:
            raise RbacRefused(USER_NOT_FOUND)
        return rec

    def role(self, name: str) -> dict[str, Any]:
        rec = self.roles.get(name)
        if rec is None:
            raise RbacRefused(ROLE_NOT_FOUND)
        return rec

    def roles_of(self, user: str) -> list[str]:
        """Returns the roles granted to `user`, sorted (`public`, which all have, not listed)."""
        return sorted(r for u, r in self.members if u == user)

    def users_of(self, role: str) -> list[str]:
        return sorted(u for u, r in self.members if r == role)

    def grants_of(self, role: str) -> list[Grant]:
        """Returns the role's grants (the public role's defaults too), sorted."""
        defaults = list(PUBLIC_GRANTS) if role == "public" else []
        return sorted(defaults + [g for g in self.grants if g.role == role])

    def custom_groups(self) -> dict[str, list[str]]:
        """Returns each custom privilege group's privileges, by group name."""
        return {name: list(rec["privileges"]) for name, rec in sorted(self.groups.items())}

    def group_users(self, group: str) -> list[str]:
        """Returns the roles holding a grant of privilege group `group`, sorted."""
        return sorted({g.role for g in self.grants if g.privilege == group})

    # -- keys -----------------------------------------------------------------------------
    @staticmethod
    def owns(key: str) -> bool:
        return key.startswith(PREFIXES)

    def remember(self, key: str, raw: bytes) -> None:
        if key.startswith(USER_KEY):
            self.users[key[len(USER_KEY) :]] = json.loads(raw)
        elif key.startswith(ROLE_KEY):
            self.roles[key[len(ROLE_KEY) :]] = json.loads(raw)
        elif key.startswith(MEMBER_KEY):
            user, _, role = key[len(MEMBER_KEY) :].partition("/")
            self.members.add((user, role))
        elif key.startswith(GROUP_KEY):
            self.groups[key[len(GROUP_KEY) :]] = json.loads(raw)
        else:  # one grant per key, whoever granted it
            self.grants = {g for g in self.grants if grant_key(g) != key}
            self.grants.add(Grant(**json.loads(raw)))

    def forget(self, key: str) -> None:
        if key.startswith(USER_KEY):
            self.users.pop(key[len(USER_KEY) :], None)
        elif key.startswith(ROLE_KEY):
            self.roles.pop(key[len(ROLE_KEY) :], None)
        elif key.startswith(MEMBER_KEY):
            user, _, role = key[len(MEMBER_KEY) :].partition("/")
            self.members.discard((user, role))
        elif key.startswith(GROUP_KEY):
            self.groups.pop(key[len(GROUP_KEY) :], None)
        else:
            self.grants = {g for g in self.grants if grant_key(g) != key}

    # -- appliers -------------------------------------------------------------------------
    def _user_created(self, e: Event) -> Writes:
        name = e.body["user_name"]
        if name in self.users:
            raise RbacRefused(f"user already exists: {name}")
        rec = {"name": name, "password_hash": e.body["password_hash"], "created_ts": e.ts}
        rec["description"] = e.body.get("description") or ""
        return {f"{USER_KEY}{name}": _dump(rec)}, []

    def _user_altered(self, e: Event) -> Writes:
        rec = {**self.user(e.body["user_name"]), "description": e.body["description"]}
        return {f"{USER_KEY}{rec['name']}": _dump(rec)}, []

    def _role_altered(self, e: Event) -> Writes:
        rec = {**self.role(e.body["role_name"]), "description": e.body["description"]}
        return {f"{ROLE_KEY}{rec['name']}": _dump(rec)}, []

    def _password_updated(self, e: Event) -> Writes:
        rec = dict(self.user(e.body["user_name"]))
        rec["password_hash"] = e.body["password_hash"]
        return {f"{USER_KEY}{rec['name']}": _dump(rec)}, []

    def _user_dropped(self, e: Event) -> Writes:
        name = e.body["user_name"]
        if name == ROOT_USER:
            raise RbacRefused("root user cannot be deleted")
        self.user(name)
        memberships = [f"{MEMBER_KEY}{name}/{r}" for r in self.roles_of(name)]
        return {}, [f"{USER_KEY}{name}", *memberships]

    def _role_created(self, e: Event) -> Writes:
        name = e.body["role_name"]
        if name in self.roles:
            raise RbacRefused(f"role [{name}] already exists")
        rec = {"name": name, "created_ts": e.ts, "description": e.body.get("description") or ""}
        return {f"{ROLE_KEY}{name}": _dump(rec)}, []

    def _role_dropped(self, e: Event) -> Writes:
        name = e.body["role_name"]
        if name in DEFAULT_ROLES:
            raise RbacRefused(f"the role[{name}] is a default role, which can't be dropped")
        self.role(name)
        grants = [grant_key(g) for g in self.grants if g.role == name]
        if grants and not e.body.get("force_drop"):
            raise RbacRefused(
                f"fail to drop the role that it has privileges. Use REVOKE API to revoke "
                f"privileges, role: {name}"
            )
        memberships = [f"{MEMBER_KEY}{u}/{name}" for u in self.users_of(name)]
        return {}, [f"{ROLE_KEY}{name}", *memberships, *grants]

    def _member_added(self, e: Event) -> Writes:
        user, role = e.body["user_name"], e.body["role_name"]
        self.user(user)
        self.role(role)
        return {f"{MEMBER_KEY}{user}/{role}": b"1"}, []

    def _member_removed(self, e: Event) -> Writes:
        user, role = e.body["user_name"], e.body["role_name"]
        self.user(user)
        self.role(role)
        return {}, [f"{MEMBER_KEY}{user}/{role}"]

    def _granted(self, e: Event) -> Writes:
        grant = grant_of(e.body)
        self.role(grant.role)
        return {grant_key(grant): _dump(asdict(grant))}, []

    def _revoked(self, e: Event) -> Writes:
        grant = grant_of(e.body)
        self.role(grant.role)
        return {}, [grant_key(grant)]

    # -- privilege groups (Milvus's rootcoord words; InvalidArgument is its ParameterInvalid)
    def _group_created(self, e: Event) -> Writes:
        name = e.body["group_name"]
        if name in self.groups:
            raise InvalidArgument(f"privilege group name [{name}] is defined by users")
        if name in DEFINED:
            raise InvalidArgument(
                f"privilege group name [{name}] is defined by built in privileges or privilege "
                "groups in system"
            )
        rec = {"name": name, "privileges": [], "created_ts": e.ts}
        return {f"{GROUP_KEY}{name}": _dump(rec)}, []

    def _group_dropped(self, e: Event) -> Writes:
        name = e.body["group_name"]
        if name not in self.groups:
            raise InvalidArgument(f"not a custom privilege group: {name}")
        users = self.group_users(name)
        if users:
            raise InvalidArgument(
                f"privilege group [{name}] is used by role [{users[0]}], Use REVOKE API to "
                "revoke it first"
            )
        return {}, [f"{GROUP_KEY}{name}"]

    def _group_altered(self, e: Event) -> Writes:
        name = e.body["group_name"]
        rec = self.groups.get(name)
        if rec is None or name in BUILTIN_GROUPS:
            raise InvalidArgument(
                f"there is no privilege group name [{name}] defined in system to operate"
            )
        held = (set(rec["privileges"]) | set(e.body["added"])) - set(e.body["removed"])
        return {f"{GROUP_KEY}{name}": _dump({**rec, "privileges": sorted(held)})}, []
