"""One reconcile pass (``sync.reconcile``), judged by what it sends: target writes, status patches,
Events, and the retry delay it hands back.

No apiserver and no service: a ``FakeApiserver`` behind a ``FakeKube`` keeps the Secrets; the
service is an ``httpx.MockTransport`` behind a real ``AuthSession`` and ``ScopeFetcher``. The
identity registry and every index are the real ones; time is an injected clock (and ``looptime``
for the host-health probe a 5xx starts). Entries are made the way the intake makes them
(``SyncIntake.upserted``) and parsed the way the controller's worker does before each pass.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from clock_fakes import Clock
from reconcile_fakes import FakeApiserver, FakeKube, RecordingQueue

from secretferry import settings as settings_mod
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.models import base as models_base
from secretferry.models import labels
from secretferry.models import secretsync as sync_models
from secretferry.reconcile import (
    conditions,
    problems,
    reasons,
    rollouts,
    scheduler,
    state,
    sync,
    sync_intake,
    template_trust,
    tenancy,
)
from secretferry.reconcile import deps as deps_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile.rendering import pool as renderpool
from secretferry.service import auth, client, fetcher, pacing, scopes

pytestmark = pytest.mark.looptime

# Loopback, so the tenancy checks let an identity use plain http; never dialled (MockTransport).
HOST = "http://127.0.0.1:9"
NAMESPACE, NAME = "ns", "app"
KEY: state.SyncKey = (NAMESPACE, NAME)
SECRET_PATH = objects.path("Secret", NAMESPACE, NAME)
STATUS_PATH = f"/apis/secretferry.io/v1alpha1/namespaces/{NAMESPACE}/secretsyncs/{NAME}/status"
# Test values; every test checks that none of them reaches a status patch or an Event.
VALUES = {"DB_USER": "bob-the-user-value", "DB_PASS": "hunter2-password-value"}
CHANGED_VALUE = "a-changed-password-value"
SETTINGS = settings_mod.Settings(default_host_api=HOST, backoff_initial_seconds=1.0, backoff_max_seconds=60.0)
# Later than any refreshInterval and any backoff here: a scope is due again, a backoff is over.
LATER_SECONDS = 3600.0

# How the pass asks to be run again after a failure, by Ready reason, as sync.py decides today:
#   BACKOFF  the SecretSync's own backoff: 0 < delay <= backoff_max_seconds (Retry-After honoured);
#   REFRESH  no backoff, but a look again at spec.refreshInterval: the service can change its mind
#            without Kubernetes hearing of it;
#   None     no timer: the change that fixes it arrives as a watch event.
# These rules moved with the Problem/Backoff rework and may move again: this table is where to follow.
BACKOFF, REFRESH = "backoff", "refresh"
NEXT_TRY: dict[str, str | None] = {
    reasons.INVALID_SPEC: None,
    reasons.SOURCE_EMPTY: None,  # the scope's resync and its events bring the next look
    reasons.TEMPLATE_ERROR: None,
    reasons.TARGET_PROTECTED: None,
    reasons.TARGET_METADATA_FORBIDDEN: None,
    reasons.KUBERNETES_ERROR: None,  # a refused (Invalid) replacement waits for an edit
    reasons.TARGET_NOT_OPTED_IN: BACKOFF,  # an opt-in arrives without an event we watch
    reasons.IDENTITY_NOT_FOUND: None,  # its creation is an identity event, which requeues
    reasons.IDENTITY_NOT_READY: None,
    reasons.IDENTITY_NOT_ALLOWED: BACKOFF,  # namespace labels are not watched
    reasons.TEMPLATES_NOT_ALLOWED: BACKOFF,  # a ServiceAccount's or Secret's opt-in is not watched
    reasons.SERVICE_UNAVAILABLE: BACKOFF,
    reasons.RATE_LIMITED: BACKOFF,
    reasons.FORBIDDEN: REFRESH,
    reasons.SOURCE_NOT_FOUND: REFRESH,
    reasons.AUTH_FAILED: REFRESH,
}
REFRESH_SECONDS = models_base.parse_duration(sync_models.DEFAULT_REFRESH_INTERVAL)


class FakeList:
    """``GET /api/v4/secrets`` answering ``secrets``, or ``failing`` (status, error, headers) while set."""

    def __init__(self) -> None:
        self.secrets = dict(VALUES)
        self.failing: tuple[int, str, dict[str, str]] | None = None
        self.listed: list[dict[str, Any]] | None = None  # the answer's secrets as given, paths and all
        self.calls = 0
        self.priorities: list[int] = []  # the pacer's priority each list call was sent at
        self.headers: dict[str, str] = {}  # on every answer (x-ratelimit-*)

    async def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/status":  # the host-health probe a 5xx starts
            return httpx.Response(200, json={"message": "Ok"})
        assert request.url.path == "/api/v4/secrets"
        self.calls += 1
        self.priorities.append(pacing.current_priority())
        if self.failing is not None:
            status, error, headers = self.failing
            body = {"reqId": "req-1", "statusCode": status, "message": "it failed", "error": error}
            return httpx.Response(status, json=body, headers=headers)
        listed = [{"secretKey": k, "secretValue": v} for k, v in self.secrets.items()]
        return httpx.Response(
            200, json={"secrets": self.listed or listed, "imports": []}, headers=self.headers
        )


def identity_body(
    name: str = "id", *, generation: int = 1, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    default = {"auth": {"accessToken": {"secretRef": {"name": "token", "key": "token"}}}}
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": generation},
        "spec": spec if spec is not None else default,
    }


def sync_body(
    *,
    generation: int = 1,
    target: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "uid-app", "generation": generation},
        "spec": {
            "identityRef": identity or {"name": "id"},
            "sources": [{"projectId": "p-1", "environment": "dev"}],
            "target": target or {},
            **spec,
        },
    }


class World:
    """One SecretSync's world: the pass's Deps over fakes, and what the fakes recorded."""

    def __init__(self, api: client.ServiceClient, service: FakeList) -> None:
        self.service = service
        self.clock = Clock()
        self.apiserver = FakeApiserver()
        self.kube = FakeKube(self.apiserver.answer)
        self.registry = ident_mod.IdentityRegistry(kube=self.kube.port(), settings=SETTINGS)
        self.identity = self.registry.upsert(ident_mod.MACHINE, identity_body())
        self.identity.session = auth.AuthSession(api, auth.StaticTokenCredentials("t"), clock=self.clock)
        self.scopes_changed: list[tuple[set[scopes.Scope], set[scopes.Scope]]] = []
        self.identity_reports: list[problems.Problem | None] = []
        self.syncs: dict[state.SyncKey, state.SyncEntry] = {}
        index = state.ScopeIndex(jitter_fraction=0)
        targets = state.TargetCache()
        self.intake = sync_intake.SyncIntake(
            kube=self.kube.port(),
            syncs=self.syncs,
            scopes=index,
            targets=targets,
            queue=RecordingQueue().port(),
            on_scopes_changed=lambda added, removed: self.scopes_changed.append((added, removed)),
        )
        self.deps = deps_mod.Deps(
            kube=self.kube.port(),
            settings=SETTINGS,
            hmac_key=b"k" * 32,
            identities=self.registry,
            fetcher=fetcher.ScopeFetcher(
                clock=self.clock,
                backoff_initial=SETTINGS.backoff_initial_seconds,
                backoff_max=SETTINGS.backoff_max_seconds,
            ),
            slugs=scopes.SlugCache(clock=self.clock),
            scopes=index,
            targets=targets,
            rollouts=rollouts.RolloutManager(
                self.kube.port(), cooldown_seconds=30.0, instance="test", clock=self.clock
            ),
            on_scopes_changed=lambda added, removed: self.scopes_changed.append((added, removed)),
            on_identity=self._identity_report,
            instance="test",
            clock=self.clock,
        )

    async def _identity_report(
        self, entry: ident_mod.IdentityEntry, problem: problems.Problem | None
    ) -> None:
        self.identity_reports.append(problem)

    @property
    def entry(self) -> state.SyncEntry:
        return self.syncs[KEY]

    async def run(self, body: dict[str, Any] | None = None) -> float | None:
        """One pass, after the intake saw ``body`` (if given); parsed as the controller's worker does."""
        if body is not None:
            self.intake.upserted(body, live=True)
        entry = self.entry
        entry.parse()
        try:
            return await sync.reconcile(self.deps, entry)
        finally:
            entry.model = None

    def record_off_slot(self) -> list[str]:
        """Record when the pass leaves its reconcile slot (``deps.off_slot``) and comes back."""
        seen: list[str] = []

        @contextlib.asynccontextmanager
        async def off_slot() -> AsyncIterator[None]:
            seen.append("left")
            try:
                yield
            finally:
                seen.append("back")

        self.deps.off_slot = off_slot
        return seen

    def later(self) -> None:
        """Time passes: every scope is due for its resync (which marks it stale), backoffs end."""
        self.clock.now += LATER_SECONDS
        self.deps.scopes.due(self.clock.now, streaming_seconds=SETTINGS.streaming_refresh_interval_seconds)

    def credentials(self, *, allow_templates: str | None) -> None:
        """The identity's token Secret, opted in to the identity and, if given, to templates."""
        annotations = {tenancy.ALLOWED_IDENTITIES_ANNOTATION: "id"}
        if allow_templates is not None:
            annotations[template_trust.ALLOW_TEMPLATES_ANNOTATION] = allow_templates
        meta = {"name": "token", "namespace": NAMESPACE, "annotations": annotations}
        self.apiserver.put(
            objects.path("Secret", NAMESPACE, "token"), {"metadata": meta, "data": {"token": b64("t")}}
        )

    # --- what the fakes recorded --------------------------------------------------------------
    def target_writes(self) -> list[tuple[str, str]]:
        prefix = objects.path("Secret", NAMESPACE)
        return [(m, p) for m, p, _ in self.kube.calls if m != "GET" and p.startswith(prefix)]

    def status_patches(self) -> list[dict[str, Any]]:
        return [kw["body"]["status"] for m, p, kw in self.kube.calls if m == "PATCH" and p == STATUS_PATH]

    def events(self) -> list[dict[str, Any]]:
        return [kw["body"] for m, p, kw in self.kube.calls if m == "POST" and p.endswith("/events")]

    def ready(self) -> dict[str, Any]:
        """The Ready condition of the last status patch."""
        found = conditions.find(self.status_patches()[-1]["conditions"], reasons.READY)
        assert found is not None
        return dict(found)

    def shown(self) -> str:
        """Everything the pass made visible: status patches and Events."""
        return json.dumps([self.status_patches(), self.events()])


@pytest.fixture
async def world() -> AsyncIterator[World]:
    service = FakeList()
    async with client.ServiceClient(HOST, transport=httpx.MockTransport(service.handler)) as api:
        made = World(api, service)
        try:
            yield made
        finally:
            await made.deps.rollouts.close()
            await made.registry.close()
        for value in [*VALUES.values(), CHANGED_VALUE]:
            assert value not in made.shown()


def assert_delay(reason: str, delay: float | None) -> None:
    """``delay`` is what ``NEXT_TRY`` says for ``reason``."""
    expected = NEXT_TRY[reason]
    if expected == BACKOFF:
        assert delay is not None and 0 < delay <= SETTINGS.backoff_max_seconds
    elif expected == REFRESH:
        assert delay == REFRESH_SECONDS
    else:
        assert delay is None


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def synced(world: World) -> None:
    """A first pass that wrote the Secret; the fakes' records start empty after it."""
    assert await world.run(sync_body()) is None
    assert world.ready()["reason"] == reasons.SYNCED
    world.kube.calls.clear()


# --- success ----------------------------------------------------------------------------------------


async def test_a_first_pass_creates_the_secret_and_reports_the_key_names(world: World) -> None:
    off_slot = world.record_off_slot()
    delay = await world.run(sync_body())

    assert delay is None
    assert world.target_writes() == [("POST", objects.path("Secret", NAMESPACE))]
    assert world.apiserver.secret_data(NAMESPACE, NAME) == VALUES
    meta = world.apiserver.objects[SECRET_PATH]["metadata"]
    assert meta["labels"][labels.SYNC_LABEL] == NAME
    assert [ref["uid"] for ref in meta["ownerReferences"]] == ["uid-app"]
    (status,) = world.status_patches()
    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("True", reasons.SYNCED)
    assert status["syncedKeys"] == ["DB_PASS", "DB_USER"]
    assert status["syncedKeyCount"] == 2
    assert status["observedGeneration"] == 1
    assert status["target"] == {"kind": "Secret", "name": NAME}
    assert world.events() == []  # a first success shows in status; no Event
    assert world.identity_reports == [None]  # the identity's login worked
    assert off_slot == []  # no template, nothing to wait for: the pass keeps its slot


@pytest.mark.parametrize("deep_first", [True, False])
async def test_a_key_from_two_folders_of_a_recursive_source_is_the_deepest_and_is_shown(
    world: World, deep_first: bool
) -> None:
    """Issue 21: the key that came last used to win, silently; now the deepest folder, whatever
    the order of the answer, and the status message names the key and its folders."""
    top = {"secretKey": "DB_USER", "secretValue": VALUES["DB_USER"], "secretPath": "/app"}
    deep = {"secretKey": "DB_USER", "secretValue": CHANGED_VALUE, "secretPath": "/app/prod"}
    other = {"secretKey": "DB_PASS", "secretValue": VALUES["DB_PASS"], "secretPath": "/app"}
    world.service.listed = [deep, top, other] if deep_first else [top, deep, other]
    body = sync_body()
    body["spec"]["sources"] = [{"projectId": "p-1", "environment": "dev", "path": "/app", "recursive": True}]

    assert await world.run(body) is None

    assert world.apiserver.secret_data(NAMESPACE, NAME) == {
        "DB_USER": CHANGED_VALUE,
        "DB_PASS": VALUES["DB_PASS"],
    }
    ready = world.ready()
    assert ready["reason"] == reasons.SYNCED
    assert ready["message"].endswith(
        "; keys listed from several folders, the deepest synced:"
        " DB_USER in /app/prod, /app (/app/prod synced)"
    )


@pytest.mark.parametrize("slug", [".", ".."])
async def test_a_dot_segment_slug_is_never_sent(world: World, slug: str) -> None:
    """``slug/..`` would be normalized to ``GET /api/v1/projects``: a route the user picked,
    whose 404 could switch the host's slug route for every identity on it."""
    body = sync_body()
    body["spec"]["sources"] = [{"projectSlug": slug, "environment": "dev"}]

    await world.run(body)

    assert world.ready()["reason"] == reasons.INVALID_SPEC
    assert world.service.calls == 0 and world.deps.slugs.lookups == 0


async def test_a_second_identical_pass_writes_nothing_and_patches_nothing(world: World) -> None:
    await synced(world)
    world.later()  # the scope's resync: the service is asked again

    delay = await world.run()

    assert delay is None
    assert world.service.calls == 2
    assert world.target_writes() == []
    assert world.status_patches() == []
    assert world.events() == []


async def test_a_changed_value_is_one_write_and_one_status_patch(world: World) -> None:
    await synced(world)
    before = world.entry.status["dataHMAC"]
    world.service.secrets["DB_PASS"] = CHANGED_VALUE
    world.later()

    delay = await world.run()

    assert delay is None
    assert world.target_writes() == [("PATCH", SECRET_PATH)]
    assert world.apiserver.secret_data(NAMESPACE, NAME) == {**VALUES, "DB_PASS": CHANGED_VALUE}
    (status,) = world.status_patches()
    assert status["dataHMAC"] != before
    assert status["syncedKeys"] == ["DB_PASS", "DB_USER"]
    assert world.events() == []  # still Ready/Synced: no transition


# --- the spec and the identity ----------------------------------------------------------------------


async def test_an_invalid_spec_is_reported_and_not_retried(world: World) -> None:
    body = sync_body()
    body["spec"]["sources"] = []

    delay = await world.run(body)

    assert_delay(reasons.INVALID_SPEC, delay)
    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.INVALID_SPEC)
    assert "spec.sources" in ready["message"]
    assert world.target_writes() == []
    assert world.service.calls == 0


def _remove(world: World) -> dict[str, Any] | None:
    world.registry.remove(ident_mod.MACHINE, NAMESPACE, "id")
    return None


def _refuse(world: World) -> dict[str, Any] | None:
    # A new generation pointing at a host the operator does not allow for namespaced identities.
    spec = {"hostAPI": "https://elsewhere.example", **identity_body()["spec"]}
    world.registry.upsert(ident_mod.MACHINE, identity_body(generation=2, spec=spec))
    return None


def _break(world: World) -> dict[str, Any] | None:
    world.registry.upsert(ident_mod.MACHINE, identity_body(generation=2, spec={"auth": {}}))
    return None


def _not_admitted(world: World) -> dict[str, Any] | None:
    world.apiserver.put(f"/api/v1/namespaces/{NAMESPACE}", {"metadata": {"name": NAMESPACE}})
    shared = identity_body("shared")
    shared["metadata"].pop("namespace")
    shared["spec"] = {
        "auth": {"accessToken": {"secretRef": {"name": "t", "key": "t", "namespace": "ops"}}},
        "allowedNamespaces": {"names": ["other"]},
    }
    world.registry.upsert(ident_mod.CLUSTER, shared)
    return sync_body(generation=2, identity={"kind": "ClusterMachineIdentity", "name": "shared"})


@pytest.mark.parametrize(
    ("change", "reason", "said"),
    [
        (_remove, reasons.IDENTITY_NOT_FOUND, "does not exist"),
        (_refuse, reasons.IDENTITY_NOT_READY, reasons.HOST_NOT_ALLOWED),
        (_break, reasons.IDENTITY_NOT_READY, "invalid spec"),
        (_not_admitted, reasons.IDENTITY_NOT_ALLOWED, "allowedNamespaces"),
    ],
)
async def test_an_identity_that_cannot_be_used_releases_the_scopes_and_keeps_the_secret(
    world: World, change: Callable[[World], dict[str, Any] | None], reason: str, said: str
) -> None:
    await synced(world)
    (scope,) = world.entry.scopes
    secret = world.apiserver.objects[SECRET_PATH]
    world.later()

    delay = await world.run(change(world))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reason)
    assert said in ready["message"]
    assert_delay(reason, delay)
    assert world.entry.scopes == ()
    assert world.deps.scopes.scopes_of(KEY) == ()
    assert world.scopes_changed[-1] == (set(), {scope})
    assert world.target_writes() == []
    assert world.apiserver.objects[SECRET_PATH] == secret
    assert world.service.calls == 1  # nothing was read with it


# --- the service ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failing", "reason"),
    [
        ((503, "ServiceUnavailable", {}), reasons.SERVICE_UNAVAILABLE),
        ((500, "InternalServerError", {}), reasons.SERVICE_UNAVAILABLE),
        ((403, "PermissionDenied", {}), reasons.FORBIDDEN),
        ((404, "NotFound", {}), reasons.SOURCE_NOT_FOUND),
        ((401, "UnauthorizedError", {}), reasons.AUTH_FAILED),
    ],
)
async def test_a_failing_service_changes_status_only_and_is_retried(
    world: World, failing: tuple[int, str, dict[str, str]], reason: str
) -> None:
    await synced(world)
    secret = world.apiserver.objects[SECRET_PATH]
    world.service.failing = failing
    world.later()

    delay = await world.run()

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reason)
    assert "project p-1 environment dev path /" in ready["message"]
    assert_delay(reason, delay)
    assert world.target_writes() == []
    assert world.apiserver.objects[SECRET_PATH] == secret
    assert world.entry.status["syncedKeys"] == ["DB_PASS", "DB_USER"]  # still what the Secret holds
    if reason == reasons.AUTH_FAILED:  # the identity's status hears of it too
        problem = world.identity_reports[-1]
        assert problem is not None and problem.reason == reasons.AUTH_FAILED


async def test_a_rate_limited_list_is_retried_no_sooner_than_the_service_asked(world: World) -> None:
    world.service.failing = (429, "TooManyRequests", {"retry-after": "30"})

    delay = await world.run(sync_body())

    assert world.ready()["reason"] == reasons.RATE_LIMITED
    assert delay is not None and delay >= 30
    assert world.target_writes() == []


async def test_a_first_pass_against_a_failing_service_creates_nothing(world: World) -> None:
    world.service.failing = (503, "ServiceUnavailable", {})

    delay = await world.run(sync_body())

    assert world.ready()["reason"] == reasons.SERVICE_UNAVAILABLE
    assert_delay(reasons.SERVICE_UNAVAILABLE, delay)
    assert world.target_writes() == []
    assert world.apiserver.secret_data(NAMESPACE, NAME) is None


async def test_an_empty_listing_leaves_an_existing_secret_as_it_is(world: World) -> None:
    await synced(world)
    world.service.secrets = {}
    world.later()

    delay = await world.run()

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.SOURCE_EMPTY)
    assert "allowEmpty" in ready["message"]
    assert_delay(reasons.SOURCE_EMPTY, delay)
    assert world.target_writes() == []
    assert world.apiserver.secret_data(NAMESPACE, NAME) == VALUES


@pytest.mark.parametrize("allow_empty", [False, True])
async def test_an_empty_source_is_written_only_when_allowed(world: World, allow_empty: bool) -> None:
    world.service.secrets = {}

    delay = await world.run(sync_body(allowEmpty=allow_empty))

    if allow_empty:
        assert delay is None
        assert world.ready()["reason"] == reasons.SYNCED
        assert world.apiserver.secret_data(NAMESPACE, NAME) == {}
        assert world.status_patches()[-1]["syncedKeys"] == []
    else:
        assert world.ready()["reason"] == reasons.SOURCE_EMPTY
        assert_delay(reasons.SOURCE_EMPTY, delay)
        assert world.target_writes() == []


# --- the target -------------------------------------------------------------------------------------


def _foreign_secret(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": NAME, "namespace": NAMESPACE, **extra.pop("metadata", {})},
        "type": "Opaque",
        "data": {"THEIRS": b64("their-own-value")},
        **extra,
    }


async def test_a_merge_target_that_has_not_opted_in_is_not_written(world: World) -> None:
    world.apiserver.put(SECRET_PATH, _foreign_secret())
    before = world.apiserver.objects[SECRET_PATH]

    delay = await world.run(sync_body(target={"creationPolicy": "Merge"}))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TARGET_NOT_OPTED_IN)
    assert_delay(reasons.TARGET_NOT_OPTED_IN, delay)
    assert world.target_writes() == []
    assert world.apiserver.objects[SECRET_PATH] == before


async def test_a_merge_target_that_opted_in_gets_our_keys_beside_its_own(world: World) -> None:
    opted = {"metadata": {"annotations": {labels.MERGE_FROM_ANNOTATION: f"other, {NAME}"}}}
    world.apiserver.put(SECRET_PATH, _foreign_secret(**opted))

    delay = await world.run(sync_body(target={"creationPolicy": "Merge"}))

    assert delay is None
    assert world.ready()["reason"] == reasons.SYNCED
    assert world.target_writes() == [("PATCH", SECRET_PATH)]
    assert world.apiserver.secret_data(NAMESPACE, NAME) == {**VALUES, "THEIRS": "their-own-value"}


@pytest.mark.parametrize(
    ("target", "existing"),
    [
        ({"name": "sh.helm.release.v1.web.v3"}, None),
        ({}, _foreign_secret(type="kubernetes.io/service-account-token")),
    ],
    ids=["helm-release-name", "service-account-token"],
)
async def test_a_protected_target_is_never_written_nor_retried(
    world: World, target: dict[str, Any], existing: dict[str, Any] | None
) -> None:
    if existing is not None:
        world.apiserver.put(SECRET_PATH, existing)
    before = dict(world.apiserver.objects)

    delay = await world.run(sync_body(target=target))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TARGET_PROTECTED)
    assert_delay(reasons.TARGET_PROTECTED, delay)
    assert world.apiserver.objects == before
    assert [m for m, _ in world.target_writes()] == ([] if existing is None else ["POST"])  # refused: 409


@pytest.mark.looptime(False)  # a real worker process renders: its pipe is real I/O
async def test_a_template_with_an_undefined_variable_is_a_template_error_and_writes_nothing(
    world: World,
) -> None:
    template = {"data": {"url": "postgres://{{ DB_USER }}:{{ DB_PASS }}@{{ NO_SUCH_SECRET }}/db"}}
    world.credentials(allow_templates="id")
    off_slot = world.record_off_slot()
    try:
        delay = await world.run(sync_body(target={"template": template}))
    finally:
        await renderpool.shared(SETTINGS).close()

    assert off_slot == ["left", "back"]  # the render was awaited without a reconcile slot

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TEMPLATE_ERROR)
    assert "'url'" in ready["message"]
    assert_delay(reasons.TEMPLATE_ERROR, delay)
    assert world.target_writes() == []


async def test_a_template_its_identity_was_not_opted_in_to_is_refused_before_anything_is_fetched(
    world: World,
) -> None:
    world.credentials(allow_templates=None)
    # The recovery attack's probe: one bit of a value, as Y or N.
    template = {"data": {"bit": "{{ 'Y' if DB_PASS[0] in 'abcdefgh' else 'N' }}"}}

    delay = await world.run(sync_body(target={"template": template}))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TEMPLATES_NOT_ALLOWED)
    assert f"Secret {NAMESPACE}/token" in ready["message"]
    assert "secretferry.io/allow-templates" in ready["message"]
    assert world.service.calls == 0
    assert world.target_writes() == []
    assert "dataHMAC" not in world.status_patches()[-1]
    assert_delay(reasons.TEMPLATES_NOT_ALLOWED, delay)


async def test_a_spec_edit_that_keeps_the_data_rewrites_the_hmac_but_restarts_nothing(world: World) -> None:
    """The data HMAC is keyed per generation: an edit changes it, and only new data restarts."""
    changed: list[str] = []
    world.deps.rollouts.data_changed = lambda sync, name, hmac, regarding: changed.append(name)  # type: ignore[method-assign]
    await synced(world)
    before = world.entry.status["dataHMAC"]

    await world.run(sync_body(generation=2, refreshInterval="10m"))

    (status,) = world.status_patches()
    assert status["dataHMAC"] != before
    assert world.target_writes() == [("PATCH", SECRET_PATH)]  # the annotation carrying the HMAC
    annotations = world.apiserver.objects[SECRET_PATH]["metadata"]["annotations"]
    assert annotations[labels.DATA_HMAC_ANNOTATION] == status["dataHMAC"]
    assert changed == []

    world.kube.calls.clear()
    world.service.secrets["DB_PASS"] = CHANGED_VALUE
    world.later()
    await world.run()
    assert changed == [NAME]


# --- Events -----------------------------------------------------------------------------------------


async def test_events_are_posted_on_ready_transitions_only(world: World) -> None:
    world.service.failing = (503, "ServiceUnavailable", {})

    await world.run(sync_body())  # first failure: one Warning
    (event,) = world.events()
    assert (event["type"], event["reason"]) == ("Warning", reasons.SERVICE_UNAVAILABLE)
    assert event["regarding"]["name"] == NAME and event["regarding"]["uid"] == "uid-app"

    world.kube.calls.clear()
    world.later()
    await world.run()  # the same failure again: nothing new to say
    assert world.service.calls == 2
    assert world.status_patches() == []
    assert world.events() == []

    world.service.failing = None
    world.later()
    await world.run()  # recovery: one Normal
    (event,) = world.events()
    assert (event["type"], event["reason"]) == ("Normal", reasons.SYNCED)
    assert world.apiserver.secret_data(NAMESPACE, NAME) == VALUES


async def test_an_event_the_apiserver_refuses_does_not_fail_the_pass(world: World) -> None:
    world.service.failing = (503, "ServiceUnavailable", {})
    events = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"
    world.apiserver.faults[("POST", events)] = kube_errors.Forbidden(403, "Forbidden", "no events")

    delay = await world.run(sync_body())

    assert world.ready()["reason"] == reasons.SERVICE_UNAVAILABLE
    assert_delay(reasons.SERVICE_UNAVAILABLE, delay)


# --- known gaps ---------------------------------------------------------------------------------------


async def test_an_apiserver_failure_while_checking_allowed_namespaces_is_reported(world: World) -> None:
    _not_admitted(world)
    namespace = f"/api/v1/namespaces/{NAMESPACE}"
    world.apiserver.faults[("GET", namespace)] = kube_errors.Unavailable(503, "ServiceUnavailable", "busy")

    delay = await world.run(sync_body(identity={"kind": "ClusterMachineIdentity", "name": "shared"}))

    assert world.ready()["status"] == "False"
    assert delay is not None and delay > 0


# --- reserved marks and type changes (issue 20) -----------------------------------------------------


@pytest.mark.parametrize(
    ("target", "reader"),
    [
        ({"labels": {"owner": "helm", "name": "web", "status": "deployed", "version": "2"}}, "owner=helm"),
        ({"kind": "ConfigMap", "labels": {"owner": "helm", "name": "web"}}, "owner=helm"),
        ({"creationPolicy": "Merge", "annotations": {"argocd.argoproj.io/tracking-id": "x"}}, "Argo CD"),
        ({"labels": {"app.kubernetes.io/instance": "web"}}, "Argo CD"),
    ],
)
async def test_reserved_marks_are_refused_before_anything_is_read(
    world: World, target: dict[str, Any], reader: str
) -> None:
    delay = await world.run(sync_body(target=target))

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.TARGET_METADATA_FORBIDDEN)
    assert reader in ready["message"]
    assert_delay(reasons.TARGET_METADATA_FORBIDDEN, delay)
    assert world.apiserver.objects == {}
    assert [(m, p) for m, p, _ in world.kube.calls if p.startswith("/api/v1/namespaces/")] == []


RETYPED = "example.com/legacy"  # a type with no rules of ours: only the apiserver's dry run judges it


async def _retyped(world: World, *, fault: kube_errors.KubeError | None) -> float | None:
    if fault is not None:
        world.apiserver.faults[("POST", objects.path("Secret", NAMESPACE))] = fault
    world.later()
    return await world.run(sync_body(generation=2, target={"type": RETYPED}))


async def test_a_type_change_the_apiserver_would_refuse_keeps_the_secret(world: World) -> None:
    """The dry run's refusal is told by field, never by the apiserver's text (which may quote a
    value), and the Secret is neither deleted nor written."""
    invalid = kube_errors.Invalid(
        422,
        "Invalid",
        "data[.dockerconfigjson]: Invalid value: invalid character 'h' (hunter2-password-value)",
        fields=("data[.dockerconfigjson]: FieldValueInvalid",),
    )
    await synced(world)
    before = world.apiserver.objects[SECRET_PATH]

    delay = await _retyped(world, fault=invalid)

    ready = world.ready()
    assert (ready["status"], ready["reason"]) == ("False", reasons.KUBERNETES_ERROR)
    assert "data[.dockerconfigjson]: FieldValueInvalid" in ready["message"]
    assert "was kept as it is (type Opaque, its data untouched)" in ready["message"]
    assert "invalid character" not in world.shown()
    assert_delay(reasons.KUBERNETES_ERROR, delay)
    assert world.apiserver.objects[SECRET_PATH] == before
    assert [m for m, _ in world.target_writes()] == ["POST"]  # the dry run, and nothing after it


async def test_a_type_change_the_apiserver_accepts_replaces_the_secret(world: World) -> None:
    await synced(world)
    delay = await _retyped(world, fault=None)

    assert delay is None
    assert world.ready()["reason"] == reasons.SYNCED
    assert world.apiserver.objects[SECRET_PATH]["type"] == RETYPED
    assert world.apiserver.secret_data(NAMESPACE, NAME) == VALUES
    dry_runs = [kw for m, _, kw in world.kube.calls if m == "POST" and (kw.get("query") or {}).get("dryRun")]
    assert [kw["body"]["metadata"].get("generateName") for kw in dry_runs] == [f"{NAME}-"]
    assert [m for m, _ in world.target_writes()] == ["POST", "DELETE", "PATCH"]


# --- pacing (issue 21) -------------------------------------------------------------------------------


@pytest.mark.parametrize(("live", "level"), [(True, pacing.LIVE), (False, pacing.ROUTINE)])
async def test_the_list_call_waits_at_the_priority_of_the_scheduler_job(
    world: World, live: bool, level: int
) -> None:
    done: list[float | None] = []

    async def job(key: str) -> None:
        done.append(await world.run(sync_body()))

    queue: scheduler.Scheduler[str] = scheduler.Scheduler(job, workers=1)
    queue.enqueue("app", live=live)
    queue.start()
    try:
        await queue.idle()
    finally:
        await queue.stop()
    assert done == [None] and world.service.priorities == [level]


async def test_routine_work_that_would_wait_for_budget_gives_its_worker_back(world: World) -> None:
    world.service.headers = {
        "x-ratelimit-limit": "40",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": "45",
    }
    await synced(world)  # the window is spent
    world.later()  # the scope's resync is due
    delays: list[float | None] = []

    async def job(key: str) -> None:
        delays.append(await world.run())

    queue: scheduler.Scheduler[str] = scheduler.Scheduler(job, workers=1)
    queue.enqueue("app", live=False)
    queue.start()
    try:
        await queue.idle()
    finally:
        await queue.stop()
    (delay,) = delays
    assert delay is not None and 40 < delay <= 45  # back at the window's reset, as backlog
    assert world.service.calls == 1 and world.status_patches() == []
