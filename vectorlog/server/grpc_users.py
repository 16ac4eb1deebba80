"""The user, role and privilege RPCs of vectorlog's gRPC service (Milvus's RBAC):
CreateCredential, UpdateCredential (passwords, or update_user's description), AlterRole,
DeleteCredential, ListCredUsers, CreateRole, DropRole, OperateUserRole, SelectRole,
SelectUser, OperatePrivilege, OperatePrivilegeV2, SelectGrant and the privilege-group RPCs
(CreatePrivilegeGroup, DropPrivilegeGroup, ListPrivilegeGroups, OperatePrivilegeGroup) over
the Client's calls. Passwords arrive base64-encoded, as pymilvus sends them."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from vectorlog.core.errors import InvalidArgument
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_access import caller
from vectorlog.server.grpc_rpc import rpc
from vectorlog.server.grpc_status import ok


def _password(raw: bytes) -> str:
    """Returns the password pymilvus base64-encoded. Raises InvalidArgument."""
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, ValueError):
        raise InvalidArgument("decode password fail") from None


class UserRpcs:
    """The RBAC RPCs, for MilvusServicer."""

    client: Client

    @rpc
    def CreateCredential(self, request: Any, context: Any) -> Any:
        password = _password(request.password)
        self.client.create_user(request.username, password, description=request.description)
        return ok()

    @rpc
    def UpdateCredential(self, request: Any, context: Any) -> Any:
        """update_password, or update_user (no passwords, a description: pymilvus's)."""
        if not request.oldPassword and not request.newPassword and request.description:
            self.client.update_user(request.username, request.description)
            return ok()
        old, new = _password(request.oldPassword), _password(request.newPassword)
        self.client.update_password(request.username, old, new)
        return ok()

    @rpc
    def DeleteCredential(self, request: Any, context: Any) -> Any:
        self.client.drop_user(request.username)
        return ok()

    @rpc
    def ListCredUsers(self, request: Any, context: Any) -> Any:
        return milvus_pb2.ListCredUsersResponse(status=ok(), usernames=self.client.list_users())

    @rpc
    def CreateRole(self, request: Any, context: Any) -> Any:
        self.client.create_role(request.entity.name, request.entity.description)
        return ok()

    @rpc
    def AlterRole(self, request: Any, context: Any) -> Any:
        self.client.alter_role(request.role_name, request.description)
        return ok()

    @rpc
    def DropRole(self, request: Any, context: Any) -> Any:
        self.client.drop_role(request.role_name, request.force_drop)
        return ok()

    @rpc
    def OperateUserRole(self, request: Any, context: Any) -> Any:
        if request.type == milvus_pb2.OperateUserRoleType.AddUserToRole:
            self.client.grant_role(request.username, request.role_name)
        else:
            self.client.revoke_role(request.username, request.role_name)
        return ok()

    @rpc
    def SelectRole(self, request: Any, context: Any) -> Any:
        names = [request.role.name] if request.role.name else self.client.list_roles()
        described = {n: self.client.describe_role(n)["description"] for n in names}
        results = [
            milvus_pb2.RoleResult(
                role=milvus_pb2.RoleEntity(name=name, description=described[name]),
                users=[milvus_pb2.UserEntity(name=u) for u in self._members(name)]
                if request.include_user_info
                else [],
            )
            for name in names
        ]
        return milvus_pb2.SelectRoleResponse(status=ok(), results=results)

    def _members(self, role: str) -> list[str]:
        users = self.client.list_users()
        return [u for u in users if role in self.client.describe_user(u)["roles"]]

    @rpc
    def SelectUser(self, request: Any, context: Any) -> Any:
        names = [request.user.name] if request.user.name else self.client.list_users()
        results = []
        for name in names:
            described = self.client.describe_user(name)
            roles = described["roles"] if request.include_role_info else []
            results.append(
                milvus_pb2.UserResult(
                    user=milvus_pb2.UserEntity(name=name),
                    roles=[milvus_pb2.RoleEntity(name=r) for r in roles],
                    description=described["description"],
                )
            )
        return milvus_pb2.SelectUserResponse(status=ok(), results=results)

    @rpc
    def OperatePrivilege(self, request: Any, context: Any) -> Any:
        e = request.entity
        args = (e.role.name, e.object.name, e.grantor.privilege.name, e.object_name, e.db_name)
        if request.type == milvus_pb2.OperatePrivilegeType.Grant:
            self.client.grant_privilege(*args, grantor=caller(context) or "root")
        else:
            self.client.revoke_privilege(*args)
        return ok()

    @rpc
    def OperatePrivilegeV2(self, request: Any, context: Any) -> Any:
        """grant/revoke_privilege_v2: a privilege or group on a database (default: `default`)
        and collection."""
        args = (request.role.name, request.grantor.privilege.name, request.collection_name)
        db = request.db_name or "default"
        if request.type == milvus_pb2.OperatePrivilegeType.Grant:
            self.client.grant_privilege_v2(*args, db, grantor=caller(context) or "root")
        else:
            self.client.revoke_privilege_v2(*args, db)
        return ok()

    @rpc
    def CreatePrivilegeGroup(self, request: Any, context: Any) -> Any:
        self.client.create_privilege_group(request.group_name)
        return ok()

    @rpc
    def DropPrivilegeGroup(self, request: Any, context: Any) -> Any:
        self.client.drop_privilege_group(request.group_name)
        return ok()

    @rpc
    def OperatePrivilegeGroup(self, request: Any, context: Any) -> Any:
        names = [p.name for p in request.privileges]
        if request.type == milvus_pb2.OperatePrivilegeGroupType.AddPrivilegesToGroup:
            self.client.add_privileges_to_group(request.group_name, names)
        else:
            self.client.remove_privileges_from_group(request.group_name, names)
        return ok()

    @rpc
    def ListPrivilegeGroups(self, request: Any, context: Any) -> Any:
        groups = [
            milvus_pb2.PrivilegeGroupInfo(
                group_name=g["privilege_group"],
                privileges=[milvus_pb2.PrivilegeEntity(name=p) for p in g["privileges"]],
            )
            for g in self.client.list_privilege_groups()
        ]
        return milvus_pb2.ListPrivilegeGroupsResponse(status=ok(), privilege_groups=groups)

    @rpc
    def SelectGrant(self, request: Any, context: Any) -> Any:
        """The role's grants, filtered by the request's object type and name if given."""
        e = request.entity
        grants = self.client.describe_role(e.role.name)["privileges"]
        entities = [
            _grant_entity(g)
            for g in grants
            if (not e.object.name or g["object_type"] == e.object.name)
            and (not e.object_name or g["object_name"] == e.object_name)
        ]
        return milvus_pb2.SelectGrantResponse(status=ok(), entities=entities)


def _grant_entity(g: dict[str, Any]) -> Any:
    return milvus_pb2.GrantEntity(
        role=milvus_pb2.RoleEntity(name=g["role_name"]),
        object=milvus_pb2.ObjectEntity(name=g["object_type"]),
        object_name=g["object_name"],
        db_name=g["db_name"],
        grantor=milvus_pb2.GrantorEntity(
            user=milvus_pb2.UserEntity(name=g["grantor_name"]),
            privilege=milvus_pb2.PrivilegeEntity(name=g["privilege"]),
        ),
    )
