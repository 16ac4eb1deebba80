"""The Client's calls about databases and access (MilvusClient's): create, list, describe,
alter and drop databases; users, roles and privilege grants. The in-process Client is the
cluster's operator and is never refused; `vectorlog serve --authorization` enforces the
grants on the calls it serves."""

from __future__ import annotations

from typing import Any

from vectorlog.core.databases import DEFAULT_DATABASE
from vectorlog.core.model import CollectionInfo
from vectorlog.sdk.calls import Calls


class AdminCalls(Calls):
    """Database and access calls of a Client (which sets `_proxy` and `db`)."""

    # -- databases ----------------------------------------------------------------------------
    def use_database(self, db_name: str) -> None:
        """Makes collection calls address database `db_name` (MilvusClient's
        use_database / using_database). Raises DatabaseNotFound, InvalidDatabaseName."""
        self._proxy.describe_database(db_name or DEFAULT_DATABASE)
        self.db = db_name or DEFAULT_DATABASE

    using_database = use_database

    def create_database(self, db_name: str, properties: dict[str, Any] | None = None) -> None:
        """Creates a database (a DDL event on the log). Raises InvalidDatabaseName,
        DatabaseExists, DatabaseLimitExceeded (64 besides default, as Milvus)."""
        self._proxy.create_database(db_name, properties)

    def drop_database(self, db_name: str) -> None:
        """Drops an empty database; a missing one is a no-op, as Milvus. Raises
        DatabaseRefused (`default`, or a database that holds collections)."""
        self._proxy.drop_database(db_name)

    def list_databases(self, as_of: int | None = None) -> list[str]:
        """Returns the databases' names, `default` first, then by creation."""
        return [d["name"] for d in self._proxy.list_databases(as_of)]

    def describe_database(self, db_name: str, as_of: int | None = None) -> dict[str, Any]:
        """Returns {"name", **properties}, as MilvusClient. Raises DatabaseNotFound."""
        rec = self._proxy.describe_database(db_name or DEFAULT_DATABASE, as_of)
        return {"name": rec["name"], **rec["properties"]}

    # -- users, roles and privileges (enforced by `vectorlog serve --authorization`) -----------
    def create_user(
        self, user_name: str, password: str, description: str | None = None, **kwargs: Any
    ) -> None:
        """Creates a user (its password kept only as a salted hash). Raises InvalidArgument
        (a name or password Milvus refuses), RbacRefused (it exists)."""
        self._proxy.credentials.create_user(user_name, password, description or "")

    def update_user(self, user_name: str, description: str, **kwargs: Any) -> None:
        """Replaces a user's description. Raises RbacRefused (no such user)."""
        self._proxy.credentials.alter_user(user_name, description)

    def update_password(
        self, user_name: str, old_password: str, new_password: str, reset_connection: bool = False
    ) -> None:
        """Changes a password, given the current one. Raises RbacRefused (wrong old
        password), InvalidArgument."""
        self._proxy.credentials.update_password(user_name, old_password, new_password)

    def drop_user(self, user_name: str) -> None:
        """Drops a user (a missing one: no-op). Raises RbacRefused (root)."""
        self._proxy.credentials.drop_user(user_name)

    def list_users(self) -> list[str]:
        return self._proxy.credentials.list_users()

    def describe_user(self, user_name: str) -> dict[str, Any]:
        """Returns {"user_name", "roles", "description"}. Raises RbacRefused (no such
        user)."""
        return self._proxy.credentials.describe_user(user_name)

    def verify_password(self, user_name: str, password: str) -> bool:
        """Returns whether `password` is the user's (False for an unknown user)."""
        return self._proxy.credentials.verify(user_name, password)

    def access_of(self, user_name: str) -> dict[str, Any]:
        """Returns {"roles", "grants"} of a user (grants as dicts of core.rbac.Grant's
        fields, the public role's included). Raises RbacRefused."""
        return self._proxy.credentials.access_of(user_name)

    def create_role(self, role_name: str, description: str = "", **kwargs: Any) -> None:
        self._proxy.credentials.create_role(role_name, description)

    def alter_role(self, role_name: str, description: str, **kwargs: Any) -> None:
        """Replaces a role's description. Raises RbacRefused (no such role)."""
        self._proxy.credentials.alter_role(role_name, description)

    def drop_role(self, role_name: str, force_drop: bool = False) -> None:
        """Drops a role; one holding privileges only with `force_drop`. Raises RbacRefused."""
        self._proxy.credentials.drop_role(role_name, force_drop)

    def list_roles(self) -> list[str]:
        return self._proxy.credentials.list_roles()

    def describe_role(self, role_name: str) -> dict[str, Any]:
        """Returns {"role", "description", "privileges": [{object_type, object_name,
        db_name, role_name, privilege, grantor_name}]}, as MilvusClient. Raises
        RbacRefused."""
        credentials = self._proxy.credentials
        grants = [privilege_of(g) for g in credentials.describe_role(role_name)]
        description = credentials.role_description(role_name)
        return {"role": role_name, "description": description, "privileges": grants}

    def grant_role(self, user_name: str, role_name: str) -> None:
        self._proxy.credentials.grant_role(user_name, role_name)

    def revoke_role(self, user_name: str, role_name: str) -> None:
        self._proxy.credentials.revoke_role(user_name, role_name)

    def grant_privilege(
        self,
        role_name: str,
        object_type: str,
        privilege: str,
        object_name: str,
        db_name: str = "",
        grantor: str = "root",
    ) -> None:
        """Grants `privilege` (Milvus's names: Insert, Search, CreateCollection, All, ...)
        on an object (`object_type` Global, Collection or User; `object_name` `*` for every
        one) in database `db_name` ("": this client's). Raises InvalidArgument (Milvus's
        "not found the privilege name"), RbacRefused (no such role)."""
        grant = grant_request(role_name, object_type, privilege, object_name, db_name or self.db)
        self._proxy.credentials.grant_privilege(grant | {"grantor": grantor})

    def revoke_privilege(
        self, role_name: str, object_type: str, privilege: str, object_name: str, db_name: str = ""
    ) -> None:
        grant = grant_request(role_name, object_type, privilege, object_name, db_name or self.db)
        self._proxy.credentials.revoke_privilege(grant)

    def database_info(self, db_name: str = "", as_of: int | None = None) -> dict[str, Any]:
        """Returns {db_id, name, properties, created_ts} of a database (this client's if
        ""). Raises DatabaseNotFound."""
        return self._proxy.describe_database(db_name or self.db, as_of)

    def database_infos(self, as_of: int | None = None) -> list[dict[str, Any]]:
        """Returns {db_id, name, properties, created_ts} of every database, by id."""
        return self._proxy.list_databases(as_of)

    def collection_info(self, collection_name: str, as_of: int | None = None) -> CollectionInfo:
        """Returns rootcoord's record of a collection (or alias) of this client's database,
        as of `as_of` (for the servers). Raises DatabaseNotFound, CollectionNotFound."""
        return self._proxy.describe_collection(self._q(collection_name), as_of)

    def alter_database_properties(self, db_name: str, properties: dict[str, Any]) -> None:
        """Sets database properties (values kept as their str()). Raises DatabaseNotFound,
        InvalidArgument (none given)."""
        self._proxy.alter_database_properties(db_name, properties)

    def drop_database_properties(self, db_name: str, property_keys: list[str]) -> None:
        """Removes database properties (a key it lacks is ignored). Raises DatabaseNotFound,
        InvalidArgument (none given)."""
        self._proxy.alter_database_properties(db_name, {}, property_keys)


def grant_request(
    role: str, object_type: str, privilege: str, object_name: str, db_name: str
) -> dict[str, Any]:
    """Returns the grant of a grant/revoke_privilege call."""
    return {
        "role_name": role,
        "object_type": object_type,
        "object_name": object_name,
        "db_name": db_name,
        "privilege": privilege,
    }


def privilege_of(grant: dict[str, Any]) -> dict[str, Any]:
    """Returns MilvusClient's describe_role entry of a grant."""
    return {
        "object_type": grant["object_type"],
        "object_name": grant["object_name"],
        "db_name": grant["db_name"],
        "role_name": grant["role"],
        "privilege": grant["privilege"],
        "grantor_name": grant["grantor"],
    }
