"""Privilege groups as Milvus 2.5 has them (its pkg/util/constant.go and rootcoord's meta
table): the nine built-in groups, the privilege names a v2 grant may use, each privilege's
level (cluster, database or collection), the checks of group names and of the
(database, collection) a v2 grant names, and the expansion of a grant's privilege into the
privileges it permits.

A custom group holds privileges (Milvus's API names) of one level; a grant of a group
(`grant_privilege_v2`) permits each privilege the group holds when the grant is checked,
so adding to a granted group widens what its roles may do at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vectorlog.core.errors import InvalidArgument
from vectorlog.core.rbac import ALL, ANY, OBJECT_PRIVILEGES

MAX_NAME_LENGTH = 255  # Milvus's proxy.maxNameLength

_COLLECTION_RO = (
    "Query",
    "Search",
    "IndexDetail",
    "GetFlushState",
    "GetLoadState",
    "GetLoadingProgress",
    "HasPartition",
    "ShowPartitions",
    "DescribeCollection",
    "DescribeAlias",
    "GetStatistics",
    "ListAliases",
)
_COLLECTION_RW = (
    *_COLLECTION_RO,
    "Load",
    "Release",
    "Insert",
    "Delete",
    "Upsert",
    "Import",
    "Flush",
    "Compaction",
    "LoadBalance",
    "CreateIndex",
    "DropIndex",
    "CreatePartition",
    "DropPartition",
)
_DATABASE_RO = ("ShowCollections", "DescribeDatabase")
_DATABASE_RW = (*_DATABASE_RO, "AlterDatabase")
_CLUSTER_RO = (
    "ListDatabases",
    "SelectOwnership",
    "SelectUser",
    "DescribeResourceGroup",
    "ListResourceGroups",
    "ListPrivilegeGroups",
)
_CLUSTER_RW = (*_CLUSTER_RO, "FlushAll", "TransferNode", "TransferReplica", "UpdateResourceGroups")

#: Milvus's built-in privilege groups (util.*Privileges), in its ListPrivilegeGroups order
BUILTIN_GROUPS: dict[str, tuple[str, ...]] = {
    "ClusterReadOnly": _CLUSTER_RO,
    "ClusterReadWrite": _CLUSTER_RW,
    "ClusterAdmin": (
        *_CLUSTER_RW,
        "BackupRBAC",
        "RestoreRBAC",
        "CreateDatabase",
        "DropDatabase",
        "CreateOwnership",
        "DropOwnership",
        "ManageOwnership",
        "CreateResourceGroup",
        "DropResourceGroup",
        "UpdateUser",
        "RenameCollection",
        "CreatePrivilegeGroup",
        "DropPrivilegeGroup",
        "OperatePrivilegeGroup",
    ),
    "DatabaseReadOnly": _DATABASE_RO,
    "DatabaseReadWrite": _DATABASE_RW,
    "DatabaseAdmin": (*_DATABASE_RW, "CreateCollection", "DropCollection"),
    "CollectionReadOnly": _COLLECTION_RO,
    "CollectionReadWrite": _COLLECTION_RW,
    "CollectionAdmin": (*_COLLECTION_RW, "CreateAlias", "DropAlias"),
}
CLUSTER, DATABASE, COLLECTION = "Cluster", "Database", "Collection"
#: the level of a privilege: the first admin group holding it (Milvus's GetPrivilegeLevel)
_LEVELS = (
    (CLUSTER, BUILTIN_GROUPS["ClusterAdmin"]),
    (DATABASE, BUILTIN_GROUPS["DatabaseAdmin"]),
    (COLLECTION, BUILTIN_GROUPS["CollectionAdmin"]),
)
#: the ObjectPrivilege names of Milvus's proto that OBJECT_PRIVILEGES leaves out
_OTHER_PRIVILEGES = frozenset(
    {
        "CreatePrivilegeGroup",
        "DropPrivilegeGroup",
        "ListPrivilegeGroups",
        "OperatePrivilegeGroup",
        "GetImportProgress",
        "ListImport",
        "AlterCollectionSchema",
        "AddFileResource",
        "RemoveFileResource",
        "ListFileResources",
        "CreateSnapshot",
        "DropSnapshot",
        "DescribeSnapshot",
        "ListSnapshots",
        "RestoreSnapshot",
    }
)
#: every name Milvus's IsPrivilegeNameDefined takes: privileges and built-in groups (its
#: legacy ReadOnly, ReadWrite and Admin too)
DEFINED = frozenset(
    {p for ps in OBJECT_PRIVILEGES.values() for p in ps}
    | _OTHER_PRIVILEGES
    | set(BUILTIN_GROUPS)
    | {"ReadOnly", "ReadWrite", "Admin", "GroupReadOnly", "GroupReadWrite", "GroupAdmin"}
)


def level_of(privilege: str) -> str:
    """Returns the privilege's level (Cluster, Database, Collection; "" for none)."""
    return next((level for level, held in _LEVELS if privilege in held), "")


def object_type_of(privilege: str) -> str:
    """Returns the object type a v2 grant of `privilege` is stored with (Milvus's
    GetObjectType): a Collection or User privilege's type, Collection for the built-in
    collection groups, Global for the rest."""
    if privilege.startswith("Collection") and privilege in BUILTIN_GROUPS:
        return "Collection"
    for kind in ("Collection", "User"):
        if privilege in OBJECT_PRIVILEGES[kind]:
            return kind
    return "Global"


def check_group_name(name: object) -> str:
    """Returns `name` if Milvus's ValidatePrivilegeGroupName takes it. Raises
    InvalidArgument."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument("privilege group name should not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"the length of a privilege group name {name} must be less than "
            f"{MAX_NAME_LENGTH} characters"
        )
    if not (name[0] == "_" or name[0].isascii() and name[0].isalpha()):
        raise InvalidArgument(
            f"the first character of a privilege group name {name} must be an underscore or letter"
        )
    if not all(c == "_" or c.isascii() and c.isalnum() for c in name):
        raise InvalidArgument(
            f"privilege group name {name} can only contain numbers, letters and underscores"
        )
    return name


def check_alteration(
    group: str, privileges: Iterable[str], custom: Mapping[str, Iterable[str]]
) -> None:
    """Raises InvalidArgument, in Milvus's words, unless `privileges` may be added to or
    removed from custom group `group` (CheckIfPrivilegeGroupAlterable)."""
    if group not in custom:
        raise InvalidArgument(
            f"there is no privilege group name [{group}] defined in system to operate"
        )
    names = list(privileges)
    if not names:
        raise InvalidArgument("privileges is empty when alter the privilege group")
    for p in names:
        if p not in DEFINED and p not in custom:
            raise InvalidArgument(
                f"there is no privilege name or privilege group name [{p}] defined in "
                "system to operate"
            )


def check_same_level(privileges: Iterable[str]) -> None:
    """Raises InvalidArgument unless `privileges` are of one level (a group's rule)."""
    if len({level_of(p) for p in privileges}) > 1:
        raise InvalidArgument("privileges are not the same privilege level")


def check_v2_scope(
    privilege: str, db_name: str, collection: str, custom: Mapping[str, Iterable[str]]
) -> None:
    """Raises InvalidArgument (Milvus's validatePrivilegeGroupParams) if a group's grant
    names a database or collection its level does not take."""
    held = list(BUILTIN_GROUPS.get(privilege) or custom.get(privilege) or ())
    if not held:
        return  # a single privilege (or an empty group): any scope
    level = level_of(held[0])
    if level == CLUSTER and (db_name != ANY or collection != ANY):
        raise InvalidArgument(
            f"dbName and collectionName should be * for the cluster level privilege: {privilege}"
        )
    if level == DATABASE and collection not in ("", ANY):
        raise InvalidArgument(
            f"collectionName should be * for the database level privilege: {privilege}"
        )
    if level == COLLECTION and db_name == ANY and collection not in ("", ANY):
        raise InvalidArgument(
            f"please specify database name for the collection level privilege: {privilege}"
        )


def expand(privilege: str, custom: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """Returns the privileges a grant of `privilege` permits: a group's members (a custom
    group's nested groups too), else the privilege itself (`All`/`*` stay themselves)."""
    if privilege in (ALL, ANY):
        return frozenset({privilege})
    held = BUILTIN_GROUPS.get(privilege)
    if held is not None:
        return frozenset(held)
    if privilege in custom:
        out: set[str] = set()
        for member in custom[privilege]:
            if member != privilege:
                out |= expand(member, {k: v for k, v in custom.items() if k != privilege})
        return frozenset(out)
    return frozenset({privilege})
