"""REST v2 handlers of users, roles and privilege groups (/v2/vectordb/users/*, /roles/*,
/privilege_groups/*) over the Client's RBAC calls, and what each REST endpoint needs under
`--authorization`: the gRPC RPC whose privilege it calls for (Milvus's proto says which) and
the object it names."""

from __future__ import annotations

from typing import Any

from vectorlog.core.rbac import ANY
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_access import Needed, needed
from vectorlog.server.rest_collections import Handler
from vectorlog.server.rest_convert import Field, parse

USER = {"userName": Field("str", required=True)}
ROLE = {"roleName": Field("str", required=True)}
PRIVILEGE = {
    **ROLE,
    "objectType": Field("str", required=True),
    "objectName": Field("str", required=True),
    "privilege": Field("str", required=True),
}


def create_user(c: Client, body: Any) -> Any:
    args = parse(body, {**USER, "password": Field("str", required=True)})
    c.create_user(args["userName"], args["password"])


def update_password(c: Client, body: Any) -> Any:
    spec = {**USER, "password": Field("str", required=True), "newPassword": Field("str", True)}
    args = parse(body, spec)
    c.update_password(args["userName"], args["password"], args["newPassword"])


def drop_user(c: Client, body: Any) -> Any:
    c.drop_user(parse(body, USER)["userName"])


def list_users(c: Client, body: Any) -> Any:
    parse(body, {})
    return c.list_users()


def describe_user(c: Client, body: Any) -> Any:
    return c.describe_user(parse(body, USER)["userName"])["roles"]


def grant_role(c: Client, body: Any) -> Any:
    args = parse(body, {**USER, **ROLE})
    c.grant_role(args["userName"], args["roleName"])


def revoke_role(c: Client, body: Any) -> Any:
    args = parse(body, {**USER, **ROLE})
    c.revoke_role(args["userName"], args["roleName"])


def create_role(c: Client, body: Any) -> Any:
    c.create_role(parse(body, ROLE)["roleName"])


def drop_role(c: Client, body: Any) -> Any:
    c.drop_role(parse(body, ROLE)["roleName"])


def list_roles(c: Client, body: Any) -> Any:
    parse(body, {})
    return c.list_roles()


def describe_role(c: Client, body: Any) -> Any:
    """Returns the role's privileges as Milvus's REST: {objectType, objectName, dbName,
    privilege, grantor}."""
    privileges = c.describe_role(parse(body, ROLE)["roleName"])["privileges"]
    return [
        {
            "objectType": p["object_type"],
            "objectName": p["object_name"],
            "dbName": p["db_name"],
            "privilege": p["privilege"],
            "grantor": p["grantor_name"],
        }
        for p in privileges
    ]


def grant_privilege(c: Client, body: Any) -> Any:
    a = parse(body, PRIVILEGE)
    c.grant_privilege(a["roleName"], a["objectType"], a["privilege"], a["objectName"])


def revoke_privilege(c: Client, body: Any) -> Any:
    a = parse(body, PRIVILEGE)
    c.revoke_privilege(a["roleName"], a["objectType"], a["privilege"], a["objectName"])


GRANT_V2 = {
    **ROLE,
    "privilege": Field("str", required=True),
    "collectionName": Field("str", required=True),
}
GROUP = {"privilegeGroupName": Field("str", required=True)}
GROUP_PRIVILEGES = {**GROUP, "privileges": Field("list", required=True)}


def grant_privilege_v2(c: Client, body: Any) -> Any:
    a = parse(body, GRANT_V2)
    db = body.get("dbName") or None
    c.grant_privilege_v2(a["roleName"], a["privilege"], a["collectionName"], db)


def revoke_privilege_v2(c: Client, body: Any) -> Any:
    a = parse(body, GRANT_V2)
    db = body.get("dbName") or None
    c.revoke_privilege_v2(a["roleName"], a["privilege"], a["collectionName"], db)


def create_privilege_group(c: Client, body: Any) -> Any:
    c.create_privilege_group(parse(body, GROUP)["privilegeGroupName"])


def drop_privilege_group(c: Client, body: Any) -> Any:
    c.drop_privilege_group(parse(body, GROUP)["privilegeGroupName"])


def list_privilege_groups(c: Client, body: Any) -> Any:
    """Returns {"privilegeGroups": [{privilegeGroupName, privileges: "A,B"}]}, as Milvus."""
    parse(body, {})
    groups = [
        {"privilegeGroupName": g["privilege_group"], "privileges": ",".join(g["privileges"])}
        for g in c.list_privilege_groups()
    ]
    return {"privilegeGroups": groups}


def add_privileges_to_group(c: Client, body: Any) -> Any:
    a = parse(body, GROUP_PRIVILEGES)
    c.add_privileges_to_group(a["privilegeGroupName"], [str(p) for p in a["privileges"]])


def remove_privileges_from_group(c: Client, body: Any) -> Any:
    a = parse(body, GROUP_PRIVILEGES)
    c.remove_privileges_from_group(a["privilegeGroupName"], [str(p) for p in a["privileges"]])


ROUTES: dict[str, Handler] = {
    "users/create": create_user,
    "users/update_password": update_password,
    "users/drop": drop_user,
    "users/list": list_users,
    "users/describe": describe_user,
    "users/grant_role": grant_role,
    "users/revoke_role": revoke_role,
    "roles/create": create_role,
    "roles/drop": drop_role,
    "roles/list": list_roles,
    "roles/describe": describe_role,
    "roles/grant_privilege": grant_privilege,
    "roles/revoke_privilege": revoke_privilege,
    "roles/grant_privilege_v2": grant_privilege_v2,
    "roles/revoke_privilege_v2": revoke_privilege_v2,
    "privilege_groups/create": create_privilege_group,
    "privilege_groups/drop": drop_privilege_group,
    "privilege_groups/list": list_privilege_groups,
    "privilege_groups/add_privileges_to_group": add_privileges_to_group,
    "privilege_groups/remove_privileges_from_group": remove_privileges_from_group,
}

#: the gRPC RPC whose privilege each REST endpoint needs (none listed: any user may call)
ENDPOINT_RPCS = {
    "collections/create": "CreateCollection",
    "collections/drop": "DropCollection",
    "collections/describe": "DescribeCollection",
    "collections/rename": "RenameCollection",
    "collections/alter_properties": "AlterCollection",
    "collections/drop_properties": "AlterCollection",
    "collections/fields/add": "AddCollectionField",
    "collections/load": "LoadCollection",
    "collections/release": "ReleaseCollection",
    "collections/get_load_state": "GetLoadState",
    "collections/get_stats": "GetCollectionStatistics",
    "collections/flush": "Flush",
    "partitions/list": "ShowPartitions",
    "partitions/has": "HasPartition",
    "partitions/create": "CreatePartition",
    "partitions/drop": "DropPartition",
    "partitions/load": "LoadPartitions",
    "partitions/release": "ReleasePartitions",
    "indexes/list": "DescribeIndex",
    "indexes/describe": "DescribeIndex",
    "indexes/create": "CreateIndex",
    "indexes/drop": "DropIndex",
    "aliases/list": "ListAliases",
    "aliases/describe": "DescribeAlias",
    "aliases/create": "CreateAlias",
    "aliases/alter": "AlterAlias",
    "aliases/drop": "DropAlias",
    "entities/insert": "Insert",
    "entities/upsert": "Upsert",
    "entities/delete": "Delete",
    "entities/search": "Search",
    "entities/advanced_search": "HybridSearch",
    "entities/hybrid_search": "HybridSearch",
    "entities/query": "Query",
    "entities/get": "Query",
    "jobs/import/create": "Import",
    "databases/create": "CreateDatabase",
    "databases/drop": "DropDatabase",
    "databases/describe": "DescribeDatabase",
    "databases/alter": "AlterDatabase",
    "databases/drop_properties": "AlterDatabase",
    "users/create": "CreateCredential",
    "users/update_password": "UpdateCredential",
    "users/drop": "DeleteCredential",
    "users/list": "ListCredUsers",
    "users/describe": "SelectUser",
    "users/grant_role": "OperateUserRole",
    "users/revoke_role": "OperateUserRole",
    "roles/create": "CreateRole",
    "roles/drop": "DropRole",
    "roles/list": "SelectRole",
    "roles/describe": "SelectGrant",
    "roles/grant_privilege": "OperatePrivilege",
    "roles/revoke_privilege": "OperatePrivilege",
    "roles/grant_privilege_v2": "OperatePrivilegeV2",
    "roles/revoke_privilege_v2": "OperatePrivilegeV2",
    "privilege_groups/create": "CreatePrivilegeGroup",
    "privilege_groups/drop": "DropPrivilegeGroup",
    "privilege_groups/list": "ListPrivilegeGroups",
    "privilege_groups/add_privileges_to_group": "OperatePrivilegeGroup",
    "privilege_groups/remove_privileges_from_group": "OperatePrivilegeGroup",
}


def endpoint_need(endpoint: str, body: Any) -> tuple[Needed, list[str]] | None:
    """Returns the privilege a REST call needs and the objects it names (None: none)."""
    rpc = ENDPOINT_RPCS.get(endpoint)
    need = needed(rpc) if rpc is not None else None
    if need is None:
        return None
    fields = body if isinstance(body, dict) else {}
    if need.object_type == "Collection":
        return need, [str(fields.get("collectionName", ""))]
    if need.object_type == "User":
        return need, [str(fields.get("userName", ""))]
    return need, [ANY]
