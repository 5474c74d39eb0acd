"""franz: users and API keys, the credentials of ``authentication.method=BASIC``.

    GET    /users               -> 200 KafkaUserList (names only; never a credential)
    PUT    /users/{user_name}   {"password": "..."} -> 204 (created or password replaced)
    DELETE /users/{user_name}   -> 204; 404 for an unknown user
    POST   /api-keys            -> 201 {"key": "ak-...", "secret": "..."}: a new user with
                                   a generated secret, shown this once (Confluent Cloud's
                                   habit: the key and secret are then sent as Basic
                                   credentials)

Listing needs DESCRIBE on the cluster, changes ALTER on the cluster (super users have
both), as Kafka's DescribeUserScramCredentials and AlterUserScramCredentials. The
stored form is a scrypt hash (``core.broker.security.credentials``); a changed or
deleted user's cached verification is dropped on every broker.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field, TypeAdapter, with_config
from starlette.responses import Response
from typing_extensions import TypedDict

from api.errors import ApiError, ErrorCode
from api.security.authentication import client_host_of, principal_of
from api.security.authorization import Need, requires, security_of
from api.v3.common import (
    ClusterLinks,
    V3Response,
    body_doc,
    cluster_links,
    errors,
    no_content,
    read_body,
    v3_json,
)
from api.v3.models import KafkaApiKey, KafkaUserList
from core.broker.security.acl import Operation, ResourceType
from core.broker.security.credentials import MAX_SECRET_BYTES, check_user_name, new_api_key

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["User (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

UserName = Annotated[str, Path(max_length=255, description="The user (or API key) name")]


@with_config({"extra": "forbid"})
class PutUserRequest(TypedDict):
    password: Annotated[str, Field(min_length=1, max_length=MAX_SECRET_BYTES,
                                   description="The user's new password (HTTP Basic)",
                                   examples=["s3cret-Passw0rd"])]


PASSWORD_IN: TypeAdapter[PutUserRequest] = TypeAdapter(PutUserRequest)
#: The request body, for ``components/schemas``.
OPENAPI_SCHEMAS = {"PutUserRequest": PutUserRequest}


def _user_data(links: ClusterLinks, name: str) -> dict[str, Any]:
    return {"kind": "KafkaUser", "metadata": {"self": links.url("users", name)},
            "cluster_id": links.cluster_id, "user_name": name}


@router.get("/users", operation_id="listKafkaUsers", summary="franz: list users and API keys",
            response_model=KafkaUserList, responses=errors(404))
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def list_users(links: ClusterLinks, request: Request) -> Response:
    names = await security_of(request).list_users()
    return v3_json(links.collection("KafkaUserList", ("users",),
                                    [_user_data(links, n) for n in names]))


@router.put(
    "/users/{user_name}",
    status_code=204,
    operation_id="updateKafkaUser",
    summary="franz: create a user or replace its password",
    openapi_extra=body_doc("PutUserRequest", {"password": "s3cret-Passw0rd"}),
    responses={204: {"description": "Stored"}, **errors(400, 404, 415, 422)},
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def put_user(user_name: UserName, links: ClusterLinks, request: Request) -> Response:
    try:
        check_user_name(user_name)
    except ValueError as exc:
        raise ApiError(400, ErrorCode.BAD_REQUEST, str(exc)) from None
    req = await read_body(request, PASSWORD_IN)
    await security_of(request).put_user(principal_of(request), user_name, req["password"],
                                        host=client_host_of(request))
    return no_content()


@router.delete(
    "/users/{user_name}",
    status_code=204,
    operation_id="deleteKafkaUser",
    summary="franz: delete a user or API key",
    responses={204: {"description": "Deleted"}, **errors(404)},
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def delete_user(user_name: UserName, links: ClusterLinks, request: Request) -> Response:
    await security_of(request).delete_user(principal_of(request), user_name,
                                           host=client_host_of(request))
    return no_content()


@router.post(
    "/api-keys",
    status_code=201,
    operation_id="createKafkaApiKey",
    summary="franz: create an API key (a user with a generated secret, shown once)",
    response_model=KafkaApiKey,
    responses={201: {"description": "The key and its secret"}, **errors(404)},
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def create_api_key(links: ClusterLinks, request: Request) -> Response:
    key, secret = new_api_key()
    await security_of(request).put_user(principal_of(request), key, secret,
                                        host=client_host_of(request))
    return v3_json({"kind": "KafkaApiKey", "key": key, "secret": secret,
                    "user": _user_data(links, key)}, status=201)
