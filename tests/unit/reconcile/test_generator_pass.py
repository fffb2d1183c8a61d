"""One generator pass against a fake apiserver: generate once, keep, regenerate on a new token
only, report a spec change without regenerating, refuse a Secret that is not ours."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from reconcile_fakes import FakeApiserver, FakeKube

from secretferry.kube import objects
from secretferry.models import generators
from secretferry.reconcile import reasons
from secretferry.reconcile.generators import decide, pass_, store

NS, NAME, UID = "app", "db", "uid-gen"
SECRET_PATH = objects.path("Secret", NS, NAME)
NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def body(
    spec: dict[str, Any] | None = None, *, token: str | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "uid": UID, "generation": 1}
    if token is not None:
        meta["annotations"] = {generators.REGENERATE_ANNOTATION: token}
    return {"metadata": meta, "spec": spec or {}, "status": status or {}}


async def run(
    api: FakeApiserver, b: dict[str, Any], kind: str = "PasswordGenerator"
) -> tuple[FakeKube, list[tuple[str, str, str]]]:
    kube = FakeKube(api.answer)
    written: list[tuple[str, str, str]] = []
    await pass_.reconcile(
        kube.port(), kind, b, instance="test", on_written=lambda *k: written.append(k[:3]), now=lambda: NOW
    )
    return kube, written


def status_patch(kube: FakeKube) -> dict[str, Any]:
    patches = [kw["body"]["status"] for m, p, kw in kube.calls if m == "PATCH" and p.endswith("/status")]
    assert patches, "no status patch"
    return dict(patches[-1])


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def test_the_first_pass_generates_an_owned_secret_and_says_so_without_the_value() -> None:
    api = FakeApiserver()
    kube, written = await run(api, body())
    secret = api.objects[SECRET_PATH]
    value = base64.b64decode(secret["data"]["password"]).decode()
    assert len(value) == 24
    assert store.owned_by(secret["metadata"], UID)
    assert secret["type"] == "Opaque"
    assert written == [("PasswordGenerator", NS, NAME)]
    status = status_patch(kube)
    assert ready(status)["reason"] == reasons.GENERATED
    assert status["secretName"] == NAME and status["generations"] == 1
    assert all(value not in repr(c) for c in kube.calls if c[1].endswith(("/status", "/events")))
    events = [kw["body"] for m, p, kw in kube.calls if p.endswith("/events")]
    assert events and events[0]["reason"] == "Generated" and value not in repr(events)


async def test_a_second_pass_keeps_the_value_even_without_status() -> None:
    api = FakeApiserver()
    await run(api, body())
    first = api.secret_data(NS, NAME)
    _, written = await run(api, body())  # a restart: no status read, the Secret is the value
    assert api.secret_data(NS, NAME) == first
    assert written == []


async def test_a_new_token_regenerates_once() -> None:
    api = FakeApiserver()
    await run(api, body())
    first = api.secret_data(NS, NAME)
    kube, written = await run(api, body(token="t1"))
    second = api.secret_data(NS, NAME)
    assert second != first and written
    assert api.objects[SECRET_PATH]["metadata"]["annotations"][store.TOKEN_ANNOTATION] == "t1"
    assert status_patch(kube)["regenerateToken"] == "t1"
    _, written = await run(api, body(token="t1"))
    assert api.secret_data(NS, NAME) == second and written == []


async def test_a_spec_change_is_reported_not_regenerated() -> None:
    api = FakeApiserver()
    await run(api, body())
    first = api.secret_data(NS, NAME)
    kube, written = await run(api, body({"length": 40}))
    assert api.secret_data(NS, NAME) == first and written == []
    assert ready(status_patch(kube))["reason"] == reasons.SPEC_CHANGED_SINCE_GENERATED
    await run(api, body({"length": 40}, token="rotate"))
    assert len((api.secret_data(NS, NAME) or {})["password"]) == 40


async def test_a_foreign_secret_of_that_name_is_a_conflict_and_stays_untouched() -> None:
    api = FakeApiserver()
    foreign = {
        "metadata": {"name": NAME, "namespace": NS, "labels": {store.GENERATOR_LABEL: NAME}},
        "data": {"password": "b3Vycw=="},
    }
    api.put(SECRET_PATH, foreign)
    kube, written = await run(api, body(token="t"))
    assert api.secret_data(NS, NAME) == {"password": "ours"}
    assert written == []
    assert ready(status_patch(kube))["reason"] == reasons.TARGET_CONFLICT
    assert not [c for c in kube.calls if c[0] in {"POST", "PATCH"} and c[1] == SECRET_PATH]


async def test_a_lost_key_is_generated_again() -> None:
    api = FakeApiserver()
    await run(api, body())
    api.objects[SECRET_PATH]["data"] = {}
    _, written = await run(api, body())
    assert written and len((api.secret_data(NS, NAME) or {})["password"]) == 24


async def test_uuid_generator_writes_the_uuid_key() -> None:
    api = FakeApiserver()
    await run(api, body(), kind="UUIDGenerator")
    assert set(api.secret_data(NS, NAME) or {}) == {"uuid"}


def test_decide_chain_order() -> None:
    gen = generators.parse("PasswordGenerator", body(token="x"))
    owned = {"ownerReferences": [{"uid": UID, "controller": True}], "annotations": {}}
    assert decide.plan(gen, None).action == "generate"
    assert decide.plan(gen, {"metadata": {}, "keys": ["password"]}).action == "refuse"
    assert decide.plan(gen, {"metadata": owned, "keys": []}).cause == "key-missing"
    assert decide.plan(gen, {"metadata": owned, "keys": ["password"]}).cause == "requested"
    # not a controller reference: not ours
    weak = {"ownerReferences": [{"uid": UID}], "annotations": {}}
    assert decide.plan(gen, {"metadata": weak, "keys": ["password"]}).action == "refuse"
