"""The tenancy checks: where a namespaced MachineIdentity may send credentials, with which token,
and whose ServiceAccount or Secret it may use (pure, table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from secretferry import settings as settings_mod
from secretferry.models import identity as identity_models
from secretferry.reconcile import reasons, tenancy

DEV = "http://127.0.0.1:8222"
POLICY = tenancy.HostPolicy.from_settings(
    settings_mod.Settings(
        default_host_api=DEV, allowed_hosts="https://secrets.example.com, vault.example:8443"
    )
)
INSECURE = tenancy.HostPolicy.from_settings(
    settings_mod.Settings(
        default_host_api="http://svc.internal:8080",
        allowed_hosts="https://secrets.example.com, vault.example:8443, http://plain.example:8080",
        allow_insecure_http=True,
    )
)


@pytest.mark.parametrize(
    ("host", "namespaced", "policy", "refused"),
    [
        # The default host, named or not, is always allowed.
        (None, True, POLICY, False),
        (DEV, True, POLICY, False),
        (DEV + "/", True, POLICY, False),
        (DEV + "/prefix/api", True, POLICY, False),
        ("http://LOCALHOST:8222", True, POLICY, True),  # another name is another host
        # Listed hosts, as URLs or host[:port] (port 443 when omitted).
        ("https://secrets.example.com", True, POLICY, False),
        ("https://SECRETS.example.com.:443/api", True, POLICY, False),
        ("https://vault.example:8443", True, POLICY, False),
        ("https://vault.example", True, POLICY, True),  # port 443 is not listed
        ("https://secrets.example.com:8443", True, POLICY, True),
        # A tenant's own listener, on loopback or anywhere else.
        ("http://127.0.0.1:4444", True, POLICY, True),
        ("https://evil.example", True, POLICY, True),
        ("https://secrets.example.com.evil.example", True, POLICY, True),
        # URLs that parsers read differently are refused outright.
        ("https://secrets.example.com@evil.example", True, POLICY, True),
        ("https://evil.example\\@secrets.example.com", True, POLICY, True),
        ("https://secrets.example.com%2F@evil.example", True, POLICY, True),
        ("https://secrets.example.com/?x=1", True, POLICY, True),
        ("https://secrets.example.com/#frag", True, POLICY, True),
        ("https://secrets.example.com /", True, POLICY, True),
        ("https://secrets.example.com:99999", True, POLICY, True),
        ("ftp://secrets.example.com", True, POLICY, True),
        # A ClusterMachineIdentity (cluster admin) may name any host, over https or to loopback.
        ("https://evil.example", False, POLICY, False),
        ("http://127.0.0.1:4444", False, POLICY, False),
        ("http://[::1]:4444", False, POLICY, False),
        ("http://localhost:4444", False, POLICY, False),
        ("http://evil.example", False, POLICY, True),  # plain http off loopback
        ("https://secrets.example.com@evil.example", False, POLICY, True),
        # Plain http off loopback only with the operator's opt-in.
        ("http://secrets.example.com:443", True, POLICY, True),
        ("http://svc.internal:8080", True, INSECURE, False),
        (None, True, INSECURE, False),
        # The scheme is compared too: plain http is allowed off loopback, but only to a URL the
        # allow-list names with http; an allowed https host is not reachable over plain http.
        ("http://secrets.example.com:443", True, INSECURE, True),
        ("http://secrets.example.com", True, INSECURE, True),
        ("http://vault.example:8443", True, INSECURE, True),  # a bare entry means https
        ("https://vault.example:8443", True, INSECURE, False),
        ("https://secrets.example.com", True, INSECURE, False),
        ("http://plain.example:8080", True, INSECURE, False),
        ("https://plain.example:8080", True, INSECURE, True),
        ("https://svc.internal:8080", True, INSECURE, True),  # the default is http only
        ("http://svc.internal:8080", False, INSECURE, False),
        ("http://secrets.example.com:443", False, INSECURE, False),  # a cluster admin's choice
    ],
)
def test_check_host(host: str | None, namespaced: bool, policy: tenancy.HostPolicy, refused: bool) -> None:
    refusal = tenancy.check_host(host, namespaced=namespaced, policy=policy)
    assert (refusal is not None) == refused, refusal
    if refusal is not None:
        assert refusal.reason == reasons.HOST_NOT_ALLOWED
        assert "nothing was sent" in refusal.message


def test_host_refusal_names_the_host_and_the_setting() -> None:
    refusal = tenancy.check_host("http://127.0.0.1:4444/x", namespaced=True, policy=POLICY)
    assert refusal is not None
    assert "127.0.0.1:4444" in refusal.message
    assert "SECRETFERRY_ALLOWED_HOSTS" in refusal.message
    insecure = tenancy.check_host("http://evil.example", namespaced=False, policy=POLICY)
    assert insecure is not None and "SECRETFERRY_ALLOW_INSECURE_HTTP" in insecure.message


def test_an_unparsable_host_is_not_echoed() -> None:
    refusal = tenancy.check_host("https://a@evil-marker.example", namespaced=True, policy=POLICY)
    assert refusal is not None and "evil-marker" not in refusal.message


@pytest.mark.parametrize(
    ("audiences", "namespaced", "refused"),
    [
        ([], True, True),
        ([""], True, True),
        (["  "], True, True),
        (["svc", ""], True, True),
        (["secretferry-test"], True, False),
        ([], False, False),  # a cluster admin may use the apiserver's audience
        (["x"], False, False),
    ],
)
def test_check_audiences(audiences: list[str], namespaced: bool, refused: bool) -> None:
    refusal = tenancy.check_audiences(audiences, namespaced=namespaced)
    assert (refusal is not None) == refused
    if refusal is not None:
        assert refusal.reason == reasons.AUDIENCE_REQUIRED


def _spec(kind: str, auth: dict[str, Any], host: str | None = None) -> identity_models.MachineIdentitySpec:
    spec: dict[str, Any] = {"auth": auth}
    if host is not None:
        spec["hostAPI"] = host
    model = (
        identity_models.ClusterMachineIdentitySpec
        if kind == "cluster"
        else identity_models.MachineIdentitySpec
    )
    return model.model_validate(spec)


K8S = {"kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "sa"}, "audiences": ["a"]}}
K8S_NO_AUD = {"kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "sa"}}}
K8S_CLUSTER = {"kubernetes": {"identityId": "i", "serviceAccountRef": {"name": "sa", "namespace": "n"}}}
UNIVERSAL = {"universal": {"clientId": "c", "clientSecretRef": {"name": "s", "key": "k"}}}


@pytest.mark.parametrize(
    ("kind", "auth", "host", "reason"),
    [
        ("namespaced", K8S, None, None),
        ("namespaced", K8S_NO_AUD, None, reasons.AUDIENCE_REQUIRED),
        ("namespaced", K8S_NO_AUD, "http://127.0.0.1:1", reasons.HOST_NOT_ALLOWED),  # the host first
        ("namespaced", UNIVERSAL, None, None),
        ("namespaced", UNIVERSAL, "http://127.0.0.1:1", reasons.HOST_NOT_ALLOWED),
        ("cluster", K8S_CLUSTER, None, None),
        ("cluster", K8S_CLUSTER, "https://anywhere.example", None),
        ("cluster", K8S_CLUSTER, "http://anywhere.example", reasons.HOST_NOT_ALLOWED),
    ],
)
def test_check_identity(kind: str, auth: dict[str, Any], host: str | None, reason: str | None) -> None:
    refusal = tenancy.check_identity(_spec(kind, auth, host), namespaced=kind == "namespaced", policy=POLICY)
    assert (refusal.reason if refusal else None) == reason


NO_TOKENS = tenancy.HostPolicy.from_settings(
    settings_mod.Settings(default_host_api=DEV, token_requests_enabled=False)
)


@pytest.mark.parametrize(
    ("kind", "auth", "host", "reason"),
    [
        # Kubernetes auth is refused for both kinds, whatever its audiences, before any TokenRequest.
        ("namespaced", K8S, None, reasons.TOKEN_REQUESTS_DISABLED),
        ("namespaced", K8S_NO_AUD, None, reasons.TOKEN_REQUESTS_DISABLED),
        ("cluster", K8S_CLUSTER, "https://anywhere.example", reasons.TOKEN_REQUESTS_DISABLED),
        ("namespaced", K8S, "https://evil.example", reasons.HOST_NOT_ALLOWED),  # the host first
        # Other methods mint nothing: unaffected.
        ("namespaced", UNIVERSAL, None, None),
    ],
)
def test_token_requests_disabled(
    kind: str, auth: dict[str, Any], host: str | None, reason: str | None
) -> None:
    refusal = tenancy.check_identity(
        _spec(kind, auth, host), namespaced=kind == "namespaced", policy=NO_TOKENS
    )
    assert (refusal.reason if refusal else None) == reason
    if refusal is not None and reason == reasons.TOKEN_REQUESTS_DISABLED:
        assert "SECRETFERRY_TOKEN_REQUESTS_ENABLED=false" in refusal.message
        assert not refusal.retriable  # only a new operator setting changes the answer


@pytest.mark.parametrize(
    ("requested", "cap", "effective", "noted"),
    [(600, 600, 600, False), (172800, 600, 600, True), (3600, 7200, 3600, False), (7201, 7200, 7200, True)],
)
def test_token_expiration_is_capped(requested: int, cap: int, effective: int, noted: bool) -> None:
    got, note = tenancy.token_expiration(requested, cap=cap)
    assert got == effective
    assert (note is not None) == noted
    if note is not None:
        assert str(requested) in note and "SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS" in note


ANNOTATION = tenancy.ALLOWED_IDENTITIES_ANNOTATION


@pytest.mark.parametrize(
    ("annotations", "identity", "allowed"),
    [
        (None, "ferry", False),
        ({}, "ferry", False),
        ({ANNOTATION: ""}, "ferry", False),
        ({ANNOTATION: "ferry"}, "ferry", True),
        ({ANNOTATION: "other, ferry "}, "ferry", True),
        ({ANNOTATION: "ferry-2"}, "ferry", False),
        ({ANNOTATION: "ferr"}, "ferry", False),
        ({ANNOTATION: "*"}, "ferry", False),  # no wildcard: every identity in the namespace is anyone's
        ({"secretferry.io/allowed-identity": "ferry"}, "ferry", False),
    ],
)
def test_opted_in(annotations: dict[str, str] | None, identity: str, allowed: bool) -> None:
    assert tenancy.opted_in(annotations, identity) is allowed


@pytest.mark.parametrize(
    ("kind", "outcome"), [("ServiceAccount", "no token was minted"), ("Secret", "nothing was read")]
)
def test_not_opted_in_says_what_to_set(kind: str, outcome: str) -> None:
    refusal = tenancy.not_opted_in(kind, namespace="team", name="deployer", identity="ferry")
    assert refusal.reason == reasons.CREDENTIALS_NOT_OPTED_IN
    assert f"{kind} team/deployer" in refusal.message
    assert ANNOTATION in refusal.message and "'ferry'" in refusal.message
    assert outcome in refusal.message


API = "https://kubernetes.default.svc.cluster.local"


@pytest.mark.parametrize(
    ("audiences", "namespaced", "allowed", "refused"),
    [
        ([API], True, False, True),
        (["svc", API], True, False, True),
        ([API], True, True, True),  # the field does not exist on the namespaced kind; never allowed
        (["svc"], True, False, False),
        ([API + "/"], True, False, False),  # the apiserver compares exact strings
        ([], False, False, True),  # empty: the apiserver's own audiences
        ([], False, True, False),
        ([API], False, True, False),
        (["svc"], False, False, False),
    ],
)
def test_check_api_audience(audiences: list[str], namespaced: bool, allowed: bool, refused: bool) -> None:
    found = tenancy.check_api_audience(
        audiences, api_audiences=frozenset({API}), namespaced=namespaced, allowed=allowed
    )
    assert (found is not None) is refused
    if found is not None:
        assert found.reason == reasons.AUDIENCE_NOT_ALLOWED and not found.retriable
        assert API in found.message and "no token was minted" in found.message
        assert ("allowAPIServerAudience" in found.message) is (not namespaced)
