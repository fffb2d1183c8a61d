"""secretferry.models.reserved: which marks other controllers act on. Table-driven."""

from __future__ import annotations

import re

import pytest

from secretferry.models import reserved

ADMIN = reserved.parse_rules("example.com/, team-controller, acme.io/owner, app.kubernetes.io/")


@pytest.mark.parametrize(
    ("key", "reader"),
    [
        # Helm: its adoption annotations and resource policy, any helm.sh subdomain.
        ("meta.helm.sh/release-name", "Helm"),
        ("meta.helm.sh/release-namespace", "Helm"),
        ("helm.sh/resource-policy", "Helm"),
        ("helm.sh/hook", "Helm"),
        # Argo CD: tracking, sync/compare options, hooks, credential Secrets.
        ("app.kubernetes.io/instance", "Argo CD's default tracking label"),
        ("argocd.argoproj.io/tracking-id", "Argo CD"),
        ("argocd.argoproj.io/sync-options", "Argo CD"),
        ("argocd.argoproj.io/compare-options", "Argo CD"),
        ("argocd.argoproj.io/hook", "Argo CD"),
        ("argocd.argoproj.io/secret-type", "Argo CD"),
        ("notifications.argoproj.io/subscribe.on-sync.slack", "Argo CD"),
        # Flux.
        ("kustomize.toolkit.fluxcd.io/name", "Flux"),
        ("kustomize.toolkit.fluxcd.io/reconcile", "Flux"),
        ("helm.toolkit.fluxcd.io/name", "Flux"),
        ("source.toolkit.fluxcd.io/anything", "Flux"),
        ("fluxcd.io/ignore", "Flux"),
        # Kubernetes, with subdomains.
        ("kubernetes.io/service-account.name", "Kubernetes"),
        ("kubectl.kubernetes.io/last-applied-configuration", "Kubernetes"),
        ("node.kubernetes.io/exclude-from-external-load-balancers", "Kubernetes"),
        ("app.kubernetes.io/managed-by", "ownership, for secretferry and Helm"),
        ("k8s.io/x", "Kubernetes"),
        ("cluster-autoscaler.kubernetes.io/safe-to-evict", "Kubernetes"),
        ("storage.k8s.io/x", "Kubernetes"),
        # Ours.
        ("secretferry.io/sync", "secretferry"),
        ("secretferry.io/merge-from", "secretferry"),
        ("secretferry.io/allowed-identities", "secretferry"),
        ("x.secretferry.io/y", "secretferry"),
        # Nobody's: plain keys, look-alike domains, the descriptive recommended labels.
        ("app", None),
        ("owner", None),
        ("team.example.org/owner", None),
        ("notkubernetes.io/x", None),
        ("kubernetes.io.example.com/x", None),
        ("k8s.io.evil/x", None),
        ("helm.shop/x", None),
        ("app.kubernetes.io/name", None),
        ("app.kubernetes.io/version", None),
        ("app.kubernetes.io/component", None),
        ("app.kubernetes.io/part-of", None),
    ],
)
def test_built_in_keys(key: str, reader: str | None) -> None:
    assert reserved.key_reader(key) == reader
    # The CRD's CEL pattern says the same about the domain (the exceptions are listed beside it).
    in_domain = re.match(reserved.domain_pattern(), key) is not None
    assert in_domain == (reader is not None) or key in reserved.DESCRIPTIVE_KEYS


@pytest.mark.parametrize(
    ("key", "value", "refused"),
    [
        ("owner", "helm", True),  # every query of Helm's Secret and ConfigMap drivers selects it
        ("owner", "Helm", False),
        ("owner", "team-a", False),
        ("name", "web", False),  # Helm's other labels mean nothing without owner=helm
        ("status", "deployed", False),
        ("version", "2", False),
        ("app.kubernetes.io/instance", "web", True),
    ],
)
def test_labels(key: str, value: str, refused: bool) -> None:
    assert (reserved.label_reader(key, value) is not None) is refused


@pytest.mark.parametrize(
    ("secret_type", "reader"),
    [
        ("kubernetes.io/service-account-token", "Kubernetes"),
        ("bootstrap.kubernetes.io/token", "Kubernetes"),
        ("helm.sh/release.v1", "Helm"),
        ("helm.sh/release.v2", "Helm"),
        ("kubernetes.io/some-future-type", "Kubernetes"),
        ("Opaque", None),
        ("kubernetes.io/tls", None),
        ("kubernetes.io/basic-auth", None),
        ("kubernetes.io/ssh-auth", None),
        ("kubernetes.io/dockercfg", None),
        ("kubernetes.io/dockerconfigjson", None),
        ("example.com/custom", None),
    ],
)
def test_types(secret_type: str, reader: str | None) -> None:
    assert reserved.type_reader(secret_type) == reader


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        ("example.com/anything", True),
        ("sub.example.com/anything", True),
        ("notexample.com/anything", False),
        ("team-controller", True),
        ("acme.io/owner", True),
        ("acme.io/other", False),
        ("app.kubernetes.io/name", True),  # the admin's word outranks the built-in exceptions
        ("app", False),
    ],
)
def test_admin_rules_extend_the_list(key: str, refused: bool) -> None:
    found = reserved.key_reader(key, ADMIN)
    assert (found is not None) is refused
    if refused:
        assert found == reserved.ADMIN_READER


def test_parse_rules() -> None:
    assert reserved.parse_rules("") == reserved.NO_RULES
    assert reserved.parse_rules(" a.io/ , b , c.io/d ,") == reserved.Rules(
        keys=frozenset({"b", "c.io/d"}), domains=frozenset({"a.io"})
    )


@pytest.mark.parametrize(
    "entry", ["/", "Example.com/", "a b", "-x", "a.io//", "a.io/b/c", "x/" + "a" * 64, "*.io/"]
)
def test_parse_rules_refuses_what_is_no_key(entry: str) -> None:
    with pytest.raises(ValueError, match="forbidden target key entry"):
        reserved.parse_rules(entry)
