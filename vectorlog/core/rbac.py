"""Users, roles and privileges as Milvus has them (its pkg/util/constant.go and rootcoord):
the names a grant may use, the checks of user, role and password arguments, and whether a
set of grants permits one privilege on one object.

A grant is (role, object type, object name, database, privilege): object types Global,
Collection and User; the object name `*` stands for every object of the type and `All`
(or `*`) for every privilege of it; a Global `All` grant permits everything in its
database. `root` and the members of `admin` are permitted everything; every user has the
`public` role, whose grants are Milvus's defaults (describe and list collections, index
details).
"""

from __future__ import annotations

from dataclasses import dataclass

from vectorlog.core.errors import InvalidArgument

ROOT_USER = "root"
#: Milvus's util.DefaultRootPassword: root's password until it is updated
DEFAULT_ROOT_PASSWORD = "Milvus"
ADMIN_ROLE, PUBLIC_ROLE = "admin", "public"
DEFAULT_ROLES = (ADMIN_ROLE, PUBLIC_ROLE)
ANY = "*"
ALL = "All"
MAX_NAME_LENGTH = 32
MIN_PASSWORD, MAX_PASSWORD = 6, 256

#: the privileges of each object type (Milvus's util.ObjectPrivileges, API names)
OBJECT_PRIVILEGES: dict[str, frozenset[str]] = {
    "Collection": frozenset(
        [
            "Load",
            "Release",
            "Compaction",
            "Insert",
            "Delete",
            "Upsert",
            "GetStatistics",
            "CreateIndex",
            "IndexDetail",
            "DropIndex",
            "Search",
            "Flush",
            "Query",
            "LoadBalance",
            "Import",
            "GetLoadingProgress",
            "GetLoadState",
            "CreatePartition",
            "DropPartition",
            "ShowPartitions",
            "HasPartition",
            "GetFlushState",
            "AddCollectionField",
        ]
    ),
    "Global": frozenset(
        [
            "All",
            "CreateCollection",
            "DropCollection",
            "DescribeCollection",
            "ShowCollections",
            "RenameCollection",
            "CreateOwnership",
            "DropOwnership",
            "SelectOwnership",
            "ManageOwnership",
            "CreateResourceGroup",
            "DropResourceGroup",
            "DescribeResourceGroup",
            "ListResourceGroups",
            "TransferReplica",
            "TransferNode",
            "UpdateResourceGroups",
            "FlushAll",
            "CreateDatabase",
            "DropDatabase",
            "ListDatabases",
            "AlterDatabase",
            "DescribeDatabase",
            "CreateAlias",
            "DropAlias",
            "DescribeAlias",
            "ListAliases",
            "BackupRBAC",
            "RestoreRBAC",
        ]
    ),
    "User": frozenset({"UpdateUser", "SelectUser"}),
}


@dataclass(frozen=True, order=True)
class Grant:
    """One privilege of a role on an object (names as Milvus's API gives them)."""

    role: str
    object_type: str
    object_name: str
    db_name: str
    privilege: str
    grantor: str = ROOT_USER

    def permits(self, object_type: str, object_name: str, db_name: str, privilege: str) -> bool:
        """Returns whether this grant permits `privilege` on the object in `db_name`."""
        if self.db_name not in (db_name, ANY):
            return False
        if self.object_type == "Global" and self.privilege in (ALL, ANY):
            return True
        return (
            self.object_type == object_type
            and self.object_name in (object_name, ANY)
            and self.privilege in (privilege, ALL, ANY)
        )


#: the `public` role's grants in every database (Milvus's default public policy)
PUBLIC_GRANTS = (
    Grant(PUBLIC_ROLE, "Global", ANY, ANY, "DescribeCollection"),
    Grant(PUBLIC_ROLE, "Global", ANY, ANY, "ShowCollections"),
    Grant(PUBLIC_ROLE, "Collection", ANY, ANY, "IndexDetail"),
)


def check_grant(object_type: str, privilege: str) -> None:
    """Raises InvalidArgument, in Milvus's words, unless `privilege` is one `object_type`
    has (`*` and `All` are any type's)."""
    if object_type not in OBJECT_PRIVILEGES:
        raise InvalidArgument(
            f"not found the object type[name: {object_type}], supported the object types: "
            f"{sorted(OBJECT_PRIVILEGES)}"
        )
    if privilege not in (ANY, ALL) and privilege not in OBJECT_PRIVILEGES[object_type]:
        raise InvalidArgument(f"not found the privilege name[{privilege}]")


def check_user_name(name: object) -> str:
    """Returns `name` if Milvus's ValidateUsername takes it. Raises InvalidArgument."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("username must be not empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"invalid username {name} with length {len(name)}, the length of username must "
            f"be less than {MAX_NAME_LENGTH}"
        )
    if not (name[0].isascii() and name[0].isalpha()):
        raise InvalidArgument(
            f"invalid user name {name}, the first character must be a letter, but got {name[0]}"
        )
    if not all(c == "_" or c.isascii() and c.isalnum() for c in name):
        raise InvalidArgument(
            f"invalid user name {name}. Username should only contain numbers, letters and "
            "underscores"
        )
    return name


def check_password(password: object) -> str:
    """Returns `password` if its length is Milvus's 6..256. Raises InvalidArgument."""
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidArgument(
            f"invalid password length: the length of password must be between "
            f"{MIN_PASSWORD} and {MAX_PASSWORD}"
        )
    return password


def check_role_name(name: object) -> str:
    """Returns `name` if Milvus's ValidateRoleName takes it. Raises InvalidArgument."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("role name should not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"the length of role name must be not greater than limit[{MAX_NAME_LENGTH}]"
        )
    if not (name[0] == "_" or name[0].isascii() and name[0].isalpha()):
        raise InvalidArgument(
            f"the first character of role name must be an underscore or letter: {name}"
        )
    if not all(c in "_-" or c.isascii() and c.isalnum() for c in name):
        raise InvalidArgument(
            "role name can only contain numbers, letters, dollars and underscores: " + name
        )
    return name
