"""The operator against a self-hosted server as released in 2024-10 (``--profile selfhosted-2024-10``).

Issue 21: the operator was run against that real server; this replays, once and end to end, what a
user of such a server can use, and what it cannot with the reason it says:

- no v4 list: every kind of listing goes through ``GET /api/v3/secrets/raw`` (exact, recursive,
  imports, references, tags), after ONE v4 probe for the host although every SecretSync starts at
  once (single flight), shown in the identity's status;
- ``projectSlug`` resolved through ``GET /api/v2/workspace/{slug}`` (v1 is a missing route there),
  shown in the identity's status;
- no event route: every SecretSync polls, and its status says why;
- ``metadataFilter`` is stripped by that server (it would list the whole folder): refused as
  ``FilterNotSupported``, nothing written;
- an unknown environment lists as 200-empty: ``SourceEmpty``, whose message says so;
- one key in two folders of a recursive source: the deepest is synced, and the status says so.

And one tenant attack on what is learned per host (the slug route is shared by every identity on
a host): a ``projectSlug`` of ``.`` or ``..`` would be normalized into another route's URL, whose
404 could decide the route for everyone; it is refused before anything is sent.

A universal-auth identity: Kubernetes auth on that server cannot check audiences (issue 21, item
4: not this module's business). Its own dev server and operator; a handful of scopes only, so that
the server's rate limits (40 secret reads a minute per client IP) are never reached.
"""

from __future__ import annotations

from collections.abc import Iterator

import harness
import pytest
import tenant
from harness import PROJECT_ID, PROJECT_SLUG, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.integration
V3 = "/api/v3/secrets/raw"
IMPORTING, IMPORTED = "/sh-app", "/sh-shared"  # dev/sh-app imports prod/sh-shared


@pytest.fixture(scope="module")
def selfhosted(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    seed = harness.seed(control_plane, reviewer_token=reviewer_token)
    project = seed["projects"][0]
    project["tags"] = [{"slug": "db", "name": "DB"}]
    project["folders"] = [
        {"environment": "dev", "path": IMPORTING},
        {"environment": "prod", "path": IMPORTED},
    ]
    project["imports"] = [
        {
            "id": "imp-sh",
            "environment": "dev",
            "path": IMPORTING,
            "from": {"environment": "prod", "path": IMPORTED},
        }
    ]
    with run_dev_server(
        seed=seed,
        data_dir=tmp_path_factory.mktemp("devserver-selfhosted"),
        extra_args=["--profile", "selfhosted-2024-10"],
    ) as server:
        harness.record_values(server)
        yield server


def _status(cp: ControlPlane, kind: str, name: str, namespace: str) -> dict[str, object]:
    return dict((harness.get(cp, kind, name, namespace) or {}).get("status") or {})


def test_what_a_user_of_a_2024_10_server_can_use(
    control_plane: ControlPlane,
    crds: None,
    selfhosted: DevServer,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cp, ns = control_plane, namespace
    path = f"/{ns}"
    selfhosted.set_secret(PROJECT_ID, "dev", path, "K", "sh-top-1")
    selfhosted.set_secret(PROJECT_ID, "dev", path, "R", "ref-${K}")
    selfhosted.set_secret(
        PROJECT_ID, "dev", path, "T", "sh-tagged-1", tags=["db"], metadata=[{"key": "team", "value": "x"}]
    )
    selfhosted.set_secret(PROJECT_ID, "dev", f"{path}/deeper", "K", "sh-deep-1")
    selfhosted.set_secret(PROJECT_ID, "dev", f"{path}/deeper", "N", "sh-nested-1")
    selfhosted.set_secret(PROJECT_ID, "dev", IMPORTING, "OWN", "sh-own-1")
    selfhosted.set_secret(PROJECT_ID, "prod", IMPORTED, "S", "sh-shared-1")

    # Everything exists before the operator starts: its first passes all list at once.
    harness.universal_identity(cp, ns, name="uni")
    slug_source = {"projectSlug": PROJECT_SLUG, "environment": "dev", "path": path}
    syncs = {
        "exact": [slug_source],
        "tree": [source(path, recursive=True)],
        "tagged": [source(path, tagSlugs=["db"])],
        "imports": [source(IMPORTING)],
        "meta": [source(path, metadataFilter=[{"key": "team", "value": "nobody"}])],
        "noenv": [{"projectId": PROJECT_ID, "environment": "staging", "path": "/"}],
    }
    for name, sources in syncs.items():
        harness.secret_sync(cp, ns, name, sources=sources, identity="uni", refreshInterval="3h")
    op = harness.start_operator(cp, selfhosted, tmp_path_factory.mktemp("op-selfhosted") / "operator.log")
    try:
        # What it can use: exact (by slug, references expanded), recursive, tags, imports.
        eventually(
            lambda: (
                secret_data(cp, ns, "exact") == {"K": "sh-top-1", "R": "ref-sh-top-1", "T": "sh-tagged-1"}
            ),
            what="an exact sync by projectSlug through v3, the reference expanded",
        )
        eventually(
            lambda: (
                secret_data(cp, ns, "tree")
                == {"K": "sh-deep-1", "R": "ref-sh-top-1", "T": "sh-tagged-1", "N": "sh-nested-1"}
            ),
            what="a recursive sync through v3, the deepest K synced",
        )
        eventually(lambda: secret_data(cp, ns, "tagged") == {"T": "sh-tagged-1"}, what="a tag filter on v3")
        eventually(
            lambda: secret_data(cp, ns, "imports") == {"OWN": "sh-own-1", "S": "sh-shared-1"},
            what="a folder with an import, through v3",
        )
        tree = harness.ready(cp, ns, "tree") or {}
        assert tree.get("reason") == "Synced"
        assert f"K in {path}/deeper, {path} ({path}/deeper synced)" in str(tree.get("message"))

        # What it cannot use, with its reason, and nothing written.
        meta = harness.wait_reason(cp, ns, "meta", "FilterNotSupported")
        assert "metadataFilter" in meta["message"] and "secret metadata" in meta["message"]
        noenv = harness.wait_reason(cp, ns, "noenv", "SourceEmpty")
        assert "environment 'staging' does not exist" in noenv["message"]
        assert secret_data(cp, ns, "meta") is None and secret_data(cp, ns, "noenv") is None

        # The routes that host has, in the identity's status.
        def identity_says_both() -> dict[str, object] | None:
            ready = harness.ready(cp, ns, "uni", kind="machineidentity") or {}
            message = str(ready.get("message"))
            return ready if "/api/v2/workspace/{slug}" in message and V3 in message else None

        ready = eventually(identity_says_both, what="the identity naming the v3 list and the v2 slug route")
        assert ready.get("status") == "True"
        assert _status(cp, "machineidentity", "uni", ns).get("listEndpoint") == V3

        # No event route: polling, and why.
        def polling() -> dict[str, object] | None:
            status = _status(cp, "secretsync", "exact", ns)
            return status if status.get("updateMode") == "Polling" else None

        status = eventually(polling, what="the polling fallback in status", timeout=60)
        assert "the server has no event stream" in str(status.get("updateModeReason"))

        # One v4 probe for the host, one v1 slug miss; the rest through v3 and v2.
        routes = selfhosted.stats()["routes"]
        assert routes.get("GET /api/v4/secrets") == 1, routes
        assert routes.get(f"GET /api/v1/projects/slug/{PROJECT_SLUG}") == 1, routes
        assert routes.get("GET /api/v2/workspace/{slug}") == 1, routes
        log = op.log_text()
        assert log.count("has no v4 list") == 1
        assert log.count("resolving project slugs through GET /api/v2/workspace/{slug}") == 1
    finally:
        op.stop()
    harness.assert_no_values_leaked(cp, op)


def test_a_tenant_cannot_pick_the_slug_route_of_a_host(
    control_plane: ControlPlane,
    selfhosted: DevServer,
    hostile: tenant.Tenant,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cp, ns = control_plane, hostile.namespace
    harness.VALUES.add("test-client-secret")  # the credential must not show up anywhere either
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "creds",
                "namespace": ns,
                "annotations": {harness.ALLOWED_IDENTITIES: "mine"},
            },
            "stringData": {"clientSecret": "test-client-secret"},
        }
    )
    hostile.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "mine", "namespace": ns},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": "test-client",
                        "clientSecretRef": {"name": "creds", "key": "clientSecret"},
                    }
                }
            },
        }
    )
    for name, slug in (("dot", "."), ("dotdot", "..")):
        hostile.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "SecretSync",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "identityRef": {"kind": "MachineIdentity", "name": "mine"},
                    "sources": [{"projectSlug": slug, "environment": "dev"}],
                },
            }
        )
    selfhosted.reset_stats()
    op = harness.start_operator(cp, selfhosted, tmp_path_factory.mktemp("op-tenant") / "operator.log")
    try:
        for name in ("dot", "dotdot"):
            refused = harness.wait_reason(cp, ns, name, "InvalidSpec")
            assert "is not a project slug; nothing was sent" in refused["message"]
        routes = selfhosted.stats()["routes"]
        # What ``.``/``..`` would have become once normalized (another test's SecretSyncs may still
        # resolve their own slug meanwhile: those are ``…/slug/app`` and ``/api/v2/workspace/{slug}``).
        normalized = {
            "GET /api/v1/projects",
            "GET /api/v1/projects/slug",
            "GET /api/v2",
            "GET /api/v2/workspace",
        }
        assert not normalized & set(routes), routes
    finally:
        op.stop()
    harness.assert_no_values_leaked(cp, op)
