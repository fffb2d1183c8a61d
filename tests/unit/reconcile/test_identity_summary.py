"""An identity's status.streams and status.scopes: built from memory, capped, written at most once
per interval and only when changed — never once per list call.

No apiserver: a fake Kube port records the status patches. Time is virtual (looptime): the
interval is 30 s and the tests run in milliseconds.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import crd_schema
import pytest
from reconcile_fakes import FakeKube

from secretferry import metrics
from secretferry import settings as settings_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import identity_summary, state
from secretferry.service import scopes as scope_mod
from secretferry.service import streams as streams_mod

HOST = "http://127.0.0.1:9"
IDENTITY = "ClusterMachineIdentity/shared"
T0 = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


class Wall:
    """The time of day, moved by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Streams:
    def __init__(self) -> None:
        self.found: dict[str, list[streams_mod.StreamSummary]] = {}

    def summaries(self) -> dict[str, list[streams_mod.StreamSummary]]:
        return self.found


def _scope(path: str, *, identity: str = IDENTITY, **kw: Any) -> scope_mod.Scope:
    return scope_mod.Scope(identity_key=identity, project_id="p1", environment="dev", path=path, **kw)


def _identity_body() -> dict[str, Any]:
    return {
        "metadata": {"name": "shared", "uid": "uid-1", "generation": 1},
        "spec": {
            "auth": {
                "universal": {
                    "clientId": "c",
                    "clientSecretRef": {"name": "s", "key": "k", "namespace": "ops"},
                }
            }
        },
    }


def _setup(
    **settings: Any,
) -> tuple[identity_summary.IdentitySummary, FakeKube, state.ScopeIndex, Streams, Wall]:
    kube = FakeKube()
    registry = ident_mod.IdentityRegistry(
        kube=kube.port(), settings=settings_mod.Settings(default_host_api=HOST)
    )
    registry.upsert(ident_mod.CLUSTER, _identity_body())
    scopes = state.ScopeIndex(jitter_fraction=0.0)
    streams, wall = Streams(), Wall()
    summary = identity_summary.IdentitySummary(
        kube=kube.port(),
        settings=settings_mod.Settings(default_host_api=HOST, **settings),
        identities=registry,
        scopes=scopes,
        streams=lambda: streams,  # type: ignore[arg-type,return-value]
        slugs=scope_mod.SlugCache(),
        wall=wall,
    )
    return summary, kube, scopes, streams, wall


def _patches(kube: FakeKube) -> list[dict[str, Any]]:
    return [kw["body"]["status"] for method, _path, kw in kube.calls if method == "PATCH"]


def _bind(scopes: state.ScopeIndex, key: str, *paths: str) -> None:
    scopes.bind(("team", key), [_scope(p) for p in paths], instant=True, refresh_seconds=60, now=0.0)


async def test_a_list_is_noted_on_its_scope_and_written_at_the_next_tick_only() -> None:
    summary, kube, scopes, _streams, wall = _setup()
    _bind(scopes, "a", "/app")
    summary.list_called(_scope("/app"), "changed", "GET /api/v4/secrets")
    assert _patches(kube) == []  # a list never writes

    assert await summary.tick() == 1
    (written,) = _patches(kube)
    assert written["scopeCount"] == 1 and written["scopesOmitted"] == 0
    assert written["scopes"] == [
        {
            "projectId": "p1",
            "environment": "dev",
            "path": "/app",
            "recursive": False,
            "filtered": False,
            "lastListTime": "2026-11-27T12:00:00Z",
            "lastListResult": "Changed",
            "secretSyncs": 1,
        }
    ]
    assert written["streams"] == [] and written["streamsOpen"] == 0
    assert "conditions" not in written  # the login check's, never this writer's
    assert crd_schema.problems(written, crd_schema.status_schema("clustermachineidentities")) == []

    assert await summary.tick() == 0  # nothing changed: no write
    wall.now += timedelta(seconds=5)
    summary.list_called(_scope("/app"), "not_modified", "GET /api/v4/secrets")
    assert await summary.tick() == 1
    assert _patches(kube)[-1]["scopes"][0]["lastListResult"] == "NotModified"
    assert _patches(kube)[-1]["scopes"][0]["lastListTime"] == "2026-11-27T12:00:05Z"


@pytest.mark.looptime
async def test_many_lists_cost_one_write_per_interval() -> None:
    """Coalescing, in virtual time: a list every second for 95 s, one write per 30 s tick."""
    summary, kube, scopes, _streams, wall = _setup(identity_summary_interval_seconds=30.0)
    _bind(scopes, "a", "/app")
    before = metrics.IDENTITY_SUMMARY_WRITES._value.get()
    runner = asyncio.create_task(summary.run())
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(95):
        wall.now += timedelta(seconds=1)
        summary.list_called(_scope("/app"), "unchanged", "GET /api/v4/secrets")
        await asyncio.sleep(1.0)
    assert loop.time() - start == pytest.approx(95.0)
    assert len(_patches(kube)) == 3  # at 30, 60 and 90 s: 95 lists, 3 writes
    assert metrics.IDENTITY_SUMMARY_WRITES._value.get() - before == 3
    # Quiet now: the ticks go on, and write nothing.
    await asyncio.sleep(120.0)
    assert len(_patches(kube)) == 4  # the last list (at 95 s) once, then nothing
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


async def test_scopes_are_capped_failing_first_and_the_rest_counted() -> None:
    summary, kube, scopes, _streams, _wall = _setup(identity_summary_max_scopes=3)
    paths = [f"/s{i:02d}" for i in range(10)]
    _bind(scopes, "a", *paths)
    for path in paths:
        summary.list_called(_scope(path), "unchanged", "GET /api/v4/secrets")
    summary.list_called(_scope("/s07"), "PermissionDenied", "GET /api/v4/secrets")
    await summary.tick()
    (written,) = _patches(kube)
    assert [s["path"] for s in written["scopes"]] == ["/s07", "/s00", "/s01"]
    assert written["scopes"][0]["lastListResult"] == "PermissionDenied"
    assert written["scopeCount"] == 10 and written["scopesOmitted"] == 7


async def test_no_scopes_listed_when_the_cap_is_zero_the_counts_stay() -> None:
    summary, kube, scopes, _streams, _wall = _setup(identity_summary_max_scopes=0)
    _bind(scopes, "a", "/a", "/b")
    await summary.tick()
    (written,) = _patches(kube)
    assert written["scopes"] == [] and written["scopeCount"] == 2 and written["scopesOmitted"] == 2


async def test_only_the_identitys_own_scopes_and_streams() -> None:
    """Another identity's scopes (another namespace's MachineIdentity of the same name) never
    show: the scope key carries the identity."""
    summary, kube, scopes, streams, _wall = _setup()
    other = "MachineIdentity/team-b/shared"
    scopes.bind(
        ("team-b", "x"), [_scope("/secret-b", identity=other)], instant=True, refresh_seconds=60, now=0
    )
    streams.found = {
        other: [streams_mod.StreamSummary("p1", streams_mod.OPEN, "connected", T0, None, 1)],
        IDENTITY: [streams_mod.StreamSummary("p1", streams_mod.REFUSED, "no plan", T0, T0, 2)],
    }
    await summary.tick()
    (written,) = _patches(kube)
    assert written["scopes"] == [] and written["scopeCount"] == 0
    assert written["streamsOpen"] == 0
    assert written["streams"] == [
        {
            "projectId": "p1",
            "state": "Refused",
            "message": "no plan",
            "since": "2026-11-27T12:00:00Z",
            "lastEventTime": "2026-11-27T12:00:00Z",
            "scopes": 2,
        }
    ]


async def test_a_recreated_identity_is_written_again_and_a_gone_scope_drops_out() -> None:
    summary, kube, scopes, _streams, _wall = _setup()
    _bind(scopes, "a", "/a", "/b")
    await summary.tick()
    scopes.unbind(("team", "a"))
    await summary.tick()
    assert _patches(kube)[-1]["scopeCount"] == 0 and len(_patches(kube)) == 2
    body = _identity_body()
    body["metadata"]["uid"] = "uid-2"
    summary._identities.upsert(ident_mod.CLUSTER, body)
    await summary.tick()
    assert len(_patches(kube)) == 3


def test_build_names_the_slug_and_marks_filtered_scopes() -> None:
    plain, tagged = _scope("/app"), _scope("/app", tag_slugs=("db",))
    st = state.ScopeState(keys={("a", "x")})
    built = identity_summary.build(
        [(tagged, st), (plain, st)], [], slugs={(IDENTITY, "p1"): "payments"}, max_scopes=50
    )
    assert [(s["filtered"], s["projectSlug"]) for s in built["scopes"]] == [
        (False, "payments"),
        (True, "payments"),
    ]
    assert "lastListTime" not in built["scopes"][0]  # not listed yet


@pytest.mark.looptime
async def test_stream_manager_summaries_follow_connects_refusals_and_events() -> None:
    from secretferry.service import errors as service_errors
    from secretferry.service import events as service_events

    wall = Wall()
    refuse = True
    feed: asyncio.Queue[service_events.StreamMessage] = asyncio.Queue()

    class Opened:
        async def __aenter__(self) -> Any:
            if refuse:
                raise service_errors.PermissionDenied("no")

            async def messages() -> Any:
                while True:
                    yield await feed.get()

            return messages()

        async def __aexit__(self, *exc: object) -> None:
            return None

    manager = streams_mod.StreamManager(
        open_stream=lambda *_a: Opened(),  # type: ignore[arg-type,return-value]
        on_resync=lambda *_a: None,
        on_mode=lambda *_a: None,
        heartbeat_seconds=1000.0,
        retry_after_refusal_seconds=60.0,
        wall=wall,
    )
    scope = _scope("/app")
    await manager.update(IDENTITY, "p1", {scope})
    ((found,),) = manager.summaries().values()
    assert (found.state, found.since) == (streams_mod.CONNECTING, T0)
    await asyncio.sleep(0.1)
    ((found,),) = manager.summaries().values()
    assert found.state == streams_mod.REFUSED and "Secret Events permission" in found.message
    refuse = False
    wall.now += timedelta(minutes=2)
    await asyncio.sleep(61.0)  # the refusal's retry
    ((found,),) = manager.summaries().values()
    assert (found.state, found.since, found.last_event_at, found.scopes) == (
        streams_mod.OPEN,
        T0 + timedelta(minutes=2),
        None,
        1,
    )
    wall.now += timedelta(minutes=1)
    item = service_events.EventItem(environment="dev", secret_path="/app", secret_key="K")
    await feed.put(service_events.SecretEvent(event_type="secret:update", items=(item,)))
    await asyncio.sleep(0.1)
    ((found,),) = manager.summaries().values()
    assert found.last_event_at == T0 + timedelta(minutes=3)
    await manager.close()


def _scripted(plan: list[str], wall: Wall) -> streams_mod.StreamManager:
    """A stream manager whose connects follow ``plan``: ``close`` (one message, then the service
    ends the stream), ``unavailable`` (the host does not answer), then ``hang`` (open, quiet)."""
    from secretferry.service import errors as service_errors
    from secretferry.service import events as service_events

    class Opened:
        async def __aenter__(self) -> Any:
            step = plan.pop(0) if plan else "hang"
            if step == "unavailable":
                raise service_errors.Unavailable("down")

            async def messages() -> Any:
                if step == "hang":
                    await asyncio.Event().wait()
                yield service_events.Heartbeat()

            return messages()

        async def __aexit__(self, *exc: object) -> None:
            return None

    return streams_mod.StreamManager(
        open_stream=lambda *_a: Opened(),  # type: ignore[arg-type,return-value]
        on_resync=lambda *_a: None,
        on_mode=lambda *_a: None,
        heartbeat_seconds=1000.0,
        backoff_initial=1.0,
        backoff_max=1.0,
        wall=wall,
    )


@pytest.mark.looptime
async def test_a_healthy_stream_the_service_closes_stays_open_since_its_first_connect() -> None:
    """A server that ends healthy streams now and then must not flap Open, nor move ``since``."""
    wall = Wall()
    manager = _scripted(["close", "close", "close"], wall)
    await manager.update(IDENTITY, "p1", {_scope("/app")})
    await asyncio.sleep(0.001)
    wall.now += timedelta(minutes=5)
    await asyncio.sleep(10.0)  # three closes and reconnects (backoff at most 1 s)
    assert manager.stats.connects == 4  # the first, and three after a close
    ((found,),) = manager.summaries().values()
    assert (found.state, found.since) == (streams_mod.OPEN, T0)
    await manager.close()


@pytest.mark.looptime
async def test_a_stream_whose_host_does_not_answer_is_reconnecting_then_open_again() -> None:
    wall = Wall()
    manager = _scripted(["unavailable"], wall)
    await manager.update(IDENTITY, "p1", {_scope("/app")})
    await asyncio.sleep(0.001)
    ((found,),) = manager.summaries().values()
    assert found.state == streams_mod.RECONNECTING and "Unavailable" in found.message
    wall.now += timedelta(seconds=10)
    await asyncio.sleep(5.0)  # the next connect holds
    ((found,),) = manager.summaries().values()
    assert (found.state, found.since) == (streams_mod.OPEN, T0 + timedelta(seconds=10))
    await manager.close()
