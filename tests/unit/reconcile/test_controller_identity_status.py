"""An identity's status names the list route of its host once a list there showed it.

No apiserver: the controller gets a stand-in Kubernetes client that records status patches, and
the service is an ``httpx.MockTransport`` without the v4 list (Fastify's route 404).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import httpx
import pytest

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import reasons
from secretferry.service import auth, client, listroutes, scopes

HOST = "http://127.0.0.1:9"


class RecordingKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, Any]]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.patches.append((path, kwargs["body"]["status"]))
        return {}


def _old_server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/v4/secrets":
        message = f"Route GET:{request.url.raw_path.decode()} not found"
        return httpx.Response(404, json={"message": message, "error": "Not Found", "statusCode": 404})
    return httpx.Response(200, json={"secrets": [{"secretKey": "K", "secretValue": "v"}], "imports": []})


@pytest.fixture
async def api() -> AsyncIterator[client.ServiceClient]:
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(_old_server)) as c:
        yield c


async def test_status_shows_the_v3_list_once_it_is_known(api: client.ServiceClient) -> None:
    kube = RecordingKube()
    ctl = controller_mod.Controller(
        kube=cast(kube_client.Kube, kube),
        settings=settings_mod.Settings(default_host_api=HOST),
        hmac_key=b"k" * 32,
        instance="test",
    )
    body = {
        "metadata": {"name": "old", "namespace": "ns", "uid": "uid-old", "generation": 1},
        "spec": {"auth": {"accessToken": {"secretRef": {"name": "tok", "key": "token"}}}},
    }
    entry = ctl.identities.upsert(ident_mod.MACHINE, body)
    entry.session = auth.AuthSession(api, auth.StaticTokenCredentials("t"))

    await ctl._on_identity(entry, None)  # logged in, nothing listed yet: route unknown
    ((path, status),) = kube.patches
    assert path.endswith("/namespaces/ns/machineidentities/old/status")
    assert "listEndpoint" not in status
    assert status["conditions"][0]["message"] == "login works"

    scope = scopes.Scope(ident_mod.key_str(entry.key), "p", "dev", "/")
    await ctl.fetcher.fetch(scope, entry.session)
    await ctl._on_identity(entry, None)
    status = kube.patches[-1][1]
    assert status["listEndpoint"] == "/api/v3/secrets/raw"
    ready = status["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == (reasons.READY, "True", reasons.LOGGED_IN)
    assert ready["message"] == f"login works; {listroutes.V3_NOTE}"
    assert ready["message"] == "login works; listing via /api/v3/secrets/raw (the server has no v4 list)"

    await ctl._on_identity(entry, None)  # nothing new: no write
    assert len(kube.patches) == 2
    # A failure keeps saying which route the host has (the field), the message is the problem's.
    await ctl._on_identity(entry, (reasons.AUTH_FAILED, "rejected"))
    status = kube.patches[-1][1]
    assert status["listEndpoint"] == "/api/v3/secrets/raw"
    assert status["conditions"][0]["message"] == "rejected"
