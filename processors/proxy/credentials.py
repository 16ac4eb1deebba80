"""The proxy's side of users, roles and grants: passwords are checked and hashed here, so
only salted hashes reach rootcoord and the log; a verified password is remembered (its
SHA-256, in memory only, against the stored hash it matched) so a call does not pay PBKDF2
again, as Milvus's proxy caches credentials. Roles and grants are rootcoord's calls."""

from __future__ import annotations

import hashlib
import hmac
import threading
from typing import Any

from vectorlog.core.errors import RbacRefused
from vectorlog.core.passwords import hash_password, verify_password
from vectorlog.core.rbac import DEFAULT_ROOT_PASSWORD, check_password, check_user_name
from vectorlog.processors.rootcoord.service import RbacService

#: Milvus's message for an update whose old password is wrong
OLD_PASSWORD_WRONG = "old password not correct for {}"


class Credentials:
    """Users' passwords over rootcoord's RBAC calls."""

    def __init__(self, rc: RbacService) -> None:
        self.rc = rc
        self._lock = threading.Lock()
        self._verified: dict[str, tuple[str | None, bytes]] = {}

    def create_user(self, name: str, password: str, description: str = "") -> None:
        """Raises InvalidArgument (name or password Milvus refuses), RbacRefused."""
        check_user_name(name)
        self.rc.create_user(name, hash_password(check_password(password)), description)

    def alter_user(self, name: str, description: str) -> None:
        self.rc.alter_user(name, description)

    def update_password(self, name: str, old_password: str, new_password: str) -> None:
        """Replaces `name`'s password if `old_password` is its current one. Raises
        RbacRefused (wrong old password, no such user), InvalidArgument."""
        check_password(new_password)
        if not self.verify(name, old_password):
            raise RbacRefused(OLD_PASSWORD_WRONG.format(name))
        self.rc.update_password(name, hash_password(new_password))

    def verify(self, name: str, password: str) -> bool:
        """Returns whether `password` is `name`'s (False for an unknown user)."""
        try:
            stored = self.rc.password_hash(name)
        except RbacRefused:
            return False
        given = hashlib.sha256(password.encode()).digest()
        with self._lock:
            known = self._verified.get(name)
        if known is not None and known[0] == stored and hmac.compare_digest(known[1], given):
            return True
        if stored is None:
            ok = hmac.compare_digest(password.encode(), DEFAULT_ROOT_PASSWORD.encode())
        else:
            ok = verify_password(password, stored)
        if ok:
            with self._lock:
                self._verified[name] = (stored, given)
        return ok

    def access_of(self, name: str) -> dict[str, Any]:
        """Returns {"roles", "grants"} of a user. Raises RbacRefused."""
        return self.rc.access_of(name)

    def drop_user(self, name: str) -> None:
        self.rc.drop_user(name)

    def list_users(self) -> list[str]:
        return self.rc.list_users()

    def describe_user(self, name: str) -> dict[str, Any]:
        return self.rc.describe_user(name)

    def create_role(self, name: str, description: str = "") -> None:
        self.rc.create_role(name, description)

    def alter_role(self, name: str, description: str) -> None:
        self.rc.alter_role(name, description)

    def role_description(self, name: str) -> str:
        return self.rc.role_description(name)

    def drop_role(self, name: str, force_drop: bool = False) -> None:
        self.rc.drop_role(name, force_drop)

    def list_roles(self) -> list[str]:
        return self.rc.list_roles()

    def describe_role(self, name: str) -> list[dict[str, Any]]:
        return self.rc.describe_role(name)

    def grant_role(self, user: str, role: str) -> None:
        self.rc.grant_role(user, role)

    def revoke_role(self, user: str, role: str) -> None:
        self.rc.revoke_role(user, role)

    def grant_privilege(self, grant: dict[str, Any]) -> None:
        self.rc.grant_privilege(grant)

    def revoke_privilege(self, grant: dict[str, Any]) -> None:
        self.rc.revoke_privilege(grant)

    def create_privilege_group(self, name: str) -> None:
        self.rc.create_privilege_group(name)

    def drop_privilege_group(self, name: str) -> None:
        self.rc.drop_privilege_group(name)

    def operate_privilege_group(self, name: str, privileges: list[str], add: bool) -> None:
        self.rc.operate_privilege_group(name, privileges, add)

    def list_privilege_groups(self) -> dict[str, list[str]]:
        return self.rc.list_privilege_groups()
