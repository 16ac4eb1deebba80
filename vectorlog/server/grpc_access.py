"""Users and privileges on the gRPC service, as Milvus with common.security.
authorizationEnabled (`vectorlog serve --authorization`): every RPC carries `authorization`
metadata, base64 of "user:password" (pymilvus's `token="user:password"` or `user=`,
`password=`), checked against the users' stored hashes before the request is decoded
(UserAuth); then the privilege the RPC needs (Milvus's own table: the privilege_ext_obj
option of each request message in Milvus's proto) is checked against the caller's roles
(Authorizer): `root` and `admin` members may do anything, a user may read and update itself,
others need a grant. A refusal is gRPC PERMISSION_DENIED with Milvus's message, and the
call does nothing."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from pymilvus.grpc_gen import common_pb2

from vectorlog.core.errors import PermissionDenied
from vectorlog.core.privilege_groups import BUILTIN_GROUPS, expand
from vectorlog.core.rbac import ADMIN_ROLE, ALL, ANY, PUBLIC_GRANTS, ROOT_USER, Grant
from vectorlog.sdk.client import Client
from vectorlog.server.grpc_auth import AUTHORIZATION, BAD_FORMAT, MISSING, WRONG, refusing
from vectorlog.server.grpc_rpc import SERVICE


def credentials(metadata: Any) -> tuple[str, str] | str:
    """Returns (user, password) of a call's `authorization` metadata, or why it has none
    (Milvus's messages)."""
    given = [value for key, value in metadata or () if key == AUTHORIZATION]
    if not given:
        return MISSING
    try:
        raw = base64.b64decode(given[0], validate=True).decode()
    except (binascii.Error, ValueError):
        return BAD_FORMAT
    user, colon, password = raw.partition(":")
    return (user, password) if colon else WRONG


def caller(context: Any) -> str | None:
    """Returns the user a call authenticates as (None without `user:password`)."""
    found = credentials(context.invocation_metadata() if context is not None else ())
    return found[0] if isinstance(found, tuple) else None


class UserAuth(grpc.ServerInterceptor):
    """Lets an RPC through only if its `authorization` is a user's name and password;
    otherwise it fails with UNAUTHENTICATED and Milvus's message before its request is
    decoded."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        found = credentials(handler_call_details.invocation_metadata)
        if isinstance(found, str):
            return refusing(handler, found)
        if not self.client.verify_password(*found):
            return refusing(handler, WRONG)
        return handler


@dataclass(frozen=True)
class Needed:
    """The privilege an RPC needs: object type, privilege (API name) and the request
    field(s) naming the object (None: the object is `*`)."""

    object_type: str
    privilege: str
    field: int | None
    repeated: bool = False


def needed(rpc: str) -> Needed | None:
    """Returns the privilege Milvus's proto says `rpc` needs (None: any user may call it)."""
    request = SERVICE.methods_by_name[rpc].input_type
    options = request.GetOptions()
    if not options.HasExtension(common_pb2.privilege_ext_obj):
        return None
    ext = options.Extensions[common_pb2.privilege_ext_obj]
    privilege = common_pb2.ObjectPrivilege.Name(ext.object_privilege).removeprefix("Privilege")
    kind = common_pb2.ObjectType.Name(ext.object_type)
    if ext.object_name_index > 0:
        return Needed(kind, privilege, ext.object_name_index)
    if ext.object_name_indexs > 0:
        return Needed(kind, privilege, ext.object_name_indexs, repeated=True)
    return Needed(kind, privilege, None)


def object_names(request: Any, need: Needed) -> list[str]:
    """Returns the names of the objects `request` acts on (["*"] for a Global one)."""
    if need.field is None:
        return [ANY]
    field = request.DESCRIPTOR.fields_by_number[need.field]
    value = getattr(request, field.name)
    if need.repeated:
        return list(value)
    if field.message_type is not None:  # an entity (SelectUser's user): its name
        return [str(value.name)]
    return [str(value)]


class Authorizer:
    """Checks the caller's privileges for each call (MilvusServicer and the REST app)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def check(self, rpc: str, request: Any, context: Any, db: str) -> None:
        """Raises PermissionDenied (Milvus's message) unless the gRPC call's user may make
        it."""
        need = needed(rpc)
        if need is not None:
            self.permit(caller(context) or "anonymous", need, object_names(request, need), db)

    def visible(self, user: str, names: list[str], db: str) -> list[str]:
        """Returns the collections of `names` (of database `db`) that `user` may see, as
        Milvus's ShowCollections filters them: every one for root, the admin role's members
        and a global grant of every privilege; else those a grant of the user's roles names
        (by name or `*`), whatever its privilege. The public role's built-in grants (every
        user's) make nothing visible."""
        if user == ROOT_USER:
            return names
        access = self.client.access_of(user)
        if ADMIN_ROLE in access["roles"]:
            return names
        grants = [Grant(**g) for g in access["grants"]]
        mine = [g for g in grants if g.db_name in (db, ANY) and g not in PUBLIC_GRANTS]
        if any(g.object_type == "Global" and g.privilege in (ALL, ANY) for g in mine):
            return names
        groups = access.get("groups") or {}
        named = {
            g.object_name for g in mine if g.object_type == "Collection" or g.privilege in groups
        }
        return names if ANY in named else [n for n in names if n in named]

    def permit(self, user: str, need: Needed, names: list[str], db: str) -> None:
        """Raises PermissionDenied unless `user` has `need` on every object of `names` in
        database `db`."""
        if user == ROOT_USER:
            return
        if need.object_type == "User" and names == [user]:
            return  # a user reads and updates itself (Milvus's isCurUserObject)
        access = self.client.access_of(user)
        if ADMIN_ROLE in access["roles"]:
            return
        grants = [Grant(**g) for g in access["grants"]]
        groups = access.get("groups") or {}
        allowed = bool(names) and all(  # no object named: denied, as Milvus
            any(_permits(g, need, name, db, groups) for g in grants) for name in names
        )
        if not allowed:
            raise PermissionDenied(
                f"Privilege{need.privilege}: permission deny to {user} in the `{db}` database"
            )


def _permits(g: Grant, need: Needed, name: str, db: str, groups: dict[str, list[str]]) -> bool:
    """Returns whether grant `g` permits `need` on object `name` of database `db`: a grant
    of a privilege group (built-in or custom, `groups`) permits each privilege it holds on
    its database and collection, whatever the privilege's object type (Milvus's RBAC v2)."""
    if g.privilege not in groups and g.privilege not in BUILTIN_GROUPS:
        return g.permits(need.object_type, name, db, need.privilege)
    return (
        g.db_name in (db, ANY)
        and g.object_name in (name, ANY)
        and need.privilege in expand(g.privilege, groups)
    )
