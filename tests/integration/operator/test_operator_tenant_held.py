"""Attacks that held in the second tenant review, replayed with only the tenant's rights.

Each test acts through ``hostile`` (a ServiceAccount that may create/update our two namespaced
kinds in one namespace and nothing else) and judges what the operator then did on its behalf.
These held when the review ran; they stay here so that they keep holding:

- 19 spellings of a host that is not the allowed one, each meant to slip past a URL parser, and an
  allowed host that redirects: the tenant's listener receives nothing at all;
- references out of the namespace: an identity of another namespace, a ClusterMachineIdentity that
  does not admit the namespace, a ServiceAccount or Secret of another namespace;
- a foreign target: an existing Secret the tenant does not own keeps its data;
- a value too large for a Secret: refused, nothing written.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.net import free_port
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

# The operator's retries back off from 0.5 s up to 3 s here (harness.start_operator): waiting this
# long after a refusal covers several of them, so "nothing received" is not "nothing yet".
_RETRIES_SECONDS = 4.0
_CLIENT_SECRET = "test-client-secret"  # the seed's universal identity: a login anyone would want


@dataclass
class Redirector:
    """An allowed host that answers every request with a redirect to ``target``."""

    target: str = ""
    port: int = 0
    hits: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def _redirecting(redirector: Redirector) -> Iterator[Redirector]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _redirect(self) -> None:
            redirector.hits.append(f"{self.command} {self.path}")
            self.send_response(307)  # 307 keeps method and body: a POSTed login would follow
            self.send_header("Location", f"{redirector.target}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _redirect

        def log_message(self, format: str, *args: Any) -> None:
            pass

    redirector.port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", redirector.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield redirector
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def redirector() -> Iterator[Redirector]:
    with _redirecting(Redirector()) as r:
        yield r


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    crds: None,
    service: DevServer,
    redirector: Redirector,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    """This module's operator also allows the redirector's origin: an installer's allowed host
    that turns out to be an open redirect."""
    op = harness.start_operator(
        control_plane,
        service,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SECRETFERRY_ALLOWED_HOSTS=redirector.url,
    )
    try:
        yield op
    finally:
        op.stop()
    harness.assert_no_values_leaked(control_plane, op)


def _host_variants(allowed: str, spy: str) -> list[str]:
    """Spellings of the tenant's listener (``spy``, host:port) meant to pass for ``allowed``, or to
    be read as one host by the check and as another by the HTTP client."""
    host, port = spy.rsplit(":", 1)
    return [
        f"http://{spy}",
        f"http://localhost:{port}",
        f"HTTP://{spy.upper()}",
        f"http://{allowed}@{spy}",
        f"http://{spy}#@{allowed}",
        f"http://{spy}?@{allowed}",
        f"http://{spy}\\@{allowed}",
        f"http://{spy}/@{allowed}",
        f"http://{allowed}%40{spy}",
        f"http://{host}.:{port}",
        f"http://127.1:{port}",
        f"http://2130706433:{port}",
        f"http://0x7f000001:{port}",
        f"http://0177.0.0.1:{port}",
        f"http://[::ffff:127.0.0.1]:{port}",
        f"http://{host}:0{port}",
        f"http:{spy}",
        f"http:/{spy}",
        f"//{spy}",
    ]


def _identity(name: str, namespace: str, host: str | None, secret: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "auth": {
            "universal": {
                "clientId": "test-client",
                "clientSecretRef": {"name": secret, "key": "clientSecret"},
            }
        }
    }
    if host is not None:
        spec["hostAPI"] = host
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "MachineIdentity",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _sync(name: str, namespace: str, identity: str, path: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"kind": "MachineIdentity", "name": identity},
            "sources": [source(path)],
            **spec,
        },
    }


def _opted_in_credentials(cp: ControlPlane, namespace: str, name: str, identities: list[str]) -> None:
    """The worst case on purpose: the credentials' owner trusts every identity the tenant makes."""
    harness.VALUES.add(_CLIENT_SECRET)  # a credential must not show up anywhere either
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": {harness.ALLOWED_IDENTITIES: ",".join(identities)},
            },
            "stringData": {"clientSecret": _CLIENT_SECRET},
        }
    )


def _identity_condition(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return eventually(
        lambda: harness.ready(cp, namespace, name, kind="machineidentity"),
        what=f"MachineIdentity {namespace}/{name} to get a Ready condition",
    )


def test_no_spelling_of_another_host_receives_anything(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """19 host spellings: each is refused by the schema or by the operator (its identity not
    Ready); none reaches the tenant's listener."""
    allowed = service.base_url.split("://", 1)[1]
    with tenant.listening() as spy:
        variants = _host_variants(allowed, spy.url.split("://", 1)[1])
        assert len(variants) == 19
        names = [f"h{i}" for i in range(len(variants))]
        _opted_in_credentials(control_plane, namespace, "creds", names)
        refused_by_schema: list[str] = []
        judged: list[str] = []
        for name, url in zip(names, variants, strict=True):
            try:
                hostile.apply(_identity(name, namespace, url, "creds"))
            except RuntimeError:
                refused_by_schema.append(url)
                continue
            judged.append(name)
        for name in judged:
            cond = _identity_condition(control_plane, namespace, name)
            # None of them is the allowed host, so none may log in anywhere.
            assert cond["reason"] in {"HostNotAllowed", "InvalidSpec"}, (name, cond)
            assert cond["status"] == "False"
        time.sleep(_RETRIES_SECONDS)
        assert spy.received == [], spy.text()
        # The operator's own check is exercised, not only the schema's pattern.
        assert len(judged) >= 10, f"schema refused {len(refused_by_schema)}, operator judged {len(judged)}"


def test_an_allowed_host_that_redirects_passes_nothing_on(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    redirector: Redirector,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """The installer allowed a host that is an open redirect: the login goes to it (it is allowed)
    and the redirect is not followed, so the tenant's listener gets no client secret."""
    _opted_in_credentials(control_plane, namespace, "creds", ["redirected"])
    with tenant.listening() as spy:
        redirector.target = spy.url
        hostile.apply(_identity("redirected", namespace, redirector.url, "creds"))
        hostile.apply(_sync("via-redirect", namespace, "redirected", f"/{namespace}"))
        eventually(lambda: redirector.hits, what="the login to reach the allowed host")
        cond = _identity_condition(control_plane, namespace, "redirected")
        assert cond["status"] == "False"
        time.sleep(_RETRIES_SECONDS)
        assert spy.received == [], spy.text()
    assert harness.get(control_plane, "secret", "via-redirect", namespace) is None


def test_references_cannot_leave_the_namespace(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """An identity of another namespace, a cluster identity that does not admit this one, and a
    ServiceAccount or Secret of another namespace: none serves the tenant."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "held-reference-value-1")
    other = f"{namespace}-victim"
    control_plane.kubectl("create", "namespace", other)
    cmid = f"only-{other}"
    try:
        harness.universal_identity(control_plane, other, "victim-id")
        control_plane.kubectl("create", "serviceaccount", "victim-sa", "-n", other)
        control_plane.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "ClusterMachineIdentity",
                "metadata": {"name": cmid},
                "spec": {
                    "auth": {
                        "universal": {
                            "clientId": "test-client",
                            "clientSecretRef": {
                                "name": "victim-id-creds",
                                "key": "clientSecret",
                                "namespace": other,
                            },
                        }
                    },
                    "allowedNamespaces": {"names": [other]},
                },
            }
        )
        assert not hostile.can("create", "clustermachineidentities.secretferry.io")

        # An identity of another namespace is looked up in the tenant's own.
        hostile.apply(_sync("cross", namespace, "victim-id", path))
        assert (
            namespace in harness.wait_reason(control_plane, namespace, "cross", "IdentityNotFound")["message"]
        )

        # A cluster identity that lists only the other namespace.
        body = _sync("denied", namespace, cmid, path)
        body["spec"]["identityRef"]["kind"] = "ClusterMachineIdentity"
        hostile.apply(body)
        harness.wait_reason(control_plane, namespace, "denied", "IdentityNotAllowed")

        # A namespaced identity's references have no namespace field: the schema refuses one.
        for auth in (
            {"kubernetes": {"identityId": harness.IDENTITY_ID, "audiences": [harness.AUDIENCE],
                            "serviceAccountRef": {"name": "victim-sa", "namespace": other}}},
            {"universal": {"clientId": "test-client",
                           "clientSecretRef": {"name": "victim-id-creds", "key": "clientSecret",
                                               "namespace": other}}},
        ):  # fmt: skip
            with pytest.raises(RuntimeError, match="namespace"):
                hostile.apply(
                    {
                        "apiVersion": "secretferry.io/v1alpha1",
                        "kind": "MachineIdentity",
                        "metadata": {"name": "reach-out", "namespace": namespace},
                        "spec": {"auth": auth},
                    }
                )
        for name in ("cross", "denied"):
            assert secret_data(control_plane, namespace, name) is None
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", cmid, check=False)
        control_plane.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_a_foreign_secret_keeps_its_data(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """A SecretSync aimed at a Secret the tenant did not create, under every creation policy."""
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, "K", "held-foreign-value-1")
    foreign = {"keep": "admin-owned-value-1"}
    harness.VALUES.update(foreign.values())
    control_plane.kubectl(
        "create", "secret", "generic", "db", "-n", namespace, "--from-literal=keep=admin-owned-value-1"
    )
    harness.universal_identity(control_plane, namespace, "uni")
    for policy in ("Owner", "Orphan", "Merge"):
        name = f"grab-{policy.lower()}"
        hostile.apply(_sync(name, namespace, "uni", path, target={"name": "db", "creationPolicy": policy}))
        expected = "TargetNotOptedIn" if policy == "Merge" else "TargetConflict"
        harness.wait_reason(control_plane, namespace, name, expected)
    time.sleep(_RETRIES_SECONDS)
    assert secret_data(control_plane, namespace, "db") == foreign


def test_a_value_too_large_for_a_secret_writes_nothing(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    hostile: tenant.Tenant,
    namespace: str,
) -> None:
    """Values adding up to more than a Secret may hold: refused by name and size, nothing written,
    and the operator goes on serving others."""
    path = f"/{namespace}/big"
    chunk = 300 * 1024  # four of these exceed the apiserver's 1 MiB object limit
    for i in range(4):
        service.set_secret(PROJECT_ID, "dev", path, f"BIG{i}", uuid.uuid4().hex * (chunk // 32))
    harness.universal_identity(control_plane, namespace, "uni")
    hostile.apply(_sync("huge", namespace, "uni", path))
    cond = harness.wait_reason(control_plane, namespace, "huge", "TargetTooLarge")
    assert "1048576" in cond["message"]
    assert harness.get(control_plane, "secret", "huge", namespace) is None
    small = f"/{namespace}/small"
    service.set_secret(PROJECT_ID, "dev", small, "S", "held-small-value-1")
    hostile.apply(_sync("small", namespace, "uni", small))
    eventually(
        lambda: secret_data(control_plane, namespace, "small") == {"S": "held-small-value-1"},
        what="another SecretSync to sync meanwhile",
    )
