"""Label and annotation keys, and Secret types, that other controllers read as ownership or orders.

Why: whatever a SecretSync asks for lands on an object the operator writes with its own rights, and
other controllers trust some marks on such objects more than they trust the user who wrote the
SecretSync. Helm finds its release records by *labels* (``owner=helm``, ``name=<release>``), not
by type or name: a Secret or ConfigMap labelled so is read as a revision of an admin's release,
and the next ``helm upgrade``/``rollback`` acts on the manifest inside it. Argo CD tracks objects
by ``app.kubernetes.io/instance`` (its default tracking label) or ``argocd.argoproj.io/tracking-id``,
and reads Secrets labelled ``argocd.argoproj.io/secret-type`` as cluster and repository
credentials; Flux owns objects carrying its ``*.toolkit.fluxcd.io`` labels; Kubernetes itself acts
on its ``kubernetes.io``/``k8s.io`` keys and on Secret types such as service-account and bootstrap
tokens. None of these is the SecretSync author's to set, so none is written (reconcile/guards.py).

Pure and dependency-free (it sits with the models because the CRD schema refuses the
built-in list at admission too, models/secretsync.py): the settings parse the admin's extra entries with it
at start-up (a bad entry stops the operator), and the guard checks each SecretSync against it.

A key is ``[prefix/]name``; its *domain* is the prefix. A domain entry refuses every key in that
domain and its subdomains (``kubernetes.io`` covers ``node.kubernetes.io/…``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

# Helm's Secret and ConfigMap drivers select every query with this label (helm pkg/storage/driver).
HELM_OWNER_LABEL: Final = ("owner", "helm")

# Domains (with every subdomain) whose keys another controller acts on, and who that is (for
# the message).
RESERVED_DOMAINS: Final[Mapping[str, str]] = {
    "kubernetes.io": "Kubernetes",
    "k8s.io": "Kubernetes",
    "helm.sh": "Helm",
    "argoproj.io": "Argo CD",
    "fluxcd.io": "Flux",
    "secretferry.io": "secretferry",
}

# Kubernetes' recommended labels that only describe an application; no controller in Kubernetes,
# Helm, Argo CD or Flux acts on them, and charts and users set them on everything. Not among them:
# app.kubernetes.io/instance (Argo CD's default tracking label) and app.kubernetes.io/managed-by
# (the operator's own, and what Helm checks before it adopts an object). An admin who wants them
# refused too lists them (or app.kubernetes.io/) in SECRETFERRY_FORBIDDEN_TARGET_KEYS.
DESCRIPTIVE_KEYS: Final = frozenset(
    {
        "app.kubernetes.io/name",
        "app.kubernetes.io/version",
        "app.kubernetes.io/component",
        "app.kubernetes.io/part-of",
    }
)

# Who reads a particular key, where that says more than its domain does.
_KNOWN_READERS: Final[Mapping[str, str]] = {
    "app.kubernetes.io/instance": "Argo CD's default tracking label",
    "app.kubernetes.io/managed-by": "ownership, for secretferry and Helm",
}

# The Secret types users sync; every other type in a reserved domain has, or may get, a controller
# that acts on it (kubernetes.io/service-account-token, bootstrap.kubernetes.io/token,
# helm.sh/release.v1, ...).
USER_SECRET_TYPES: Final = frozenset(
    {
        "kubernetes.io/basic-auth",
        "kubernetes.io/dockercfg",
        "kubernetes.io/dockerconfigjson",
        "kubernetes.io/ssh-auth",
        "kubernetes.io/tls",
    }
)

ADMIN_READER: Final = "this cluster's forbidden target keys"

# A label key's prefix is a DNS subdomain, its name at most 63 characters of [A-Za-z0-9._-]
# (apimachinery IsQualifiedName); an admin's domain entry is the prefix alone, ending in "/".
_DOMAIN_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DOMAIN_MAX: Final = 253  # a DNS subdomain


@dataclass(frozen=True, slots=True)
class Rules:
    """The admin's additions (``SECRETFERRY_FORBIDDEN_TARGET_KEYS``): exact keys, and domains."""

    keys: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()


NO_RULES: Final = Rules()


@functools.lru_cache(maxsize=8)  # one settings text per process; parsed once, read per write
# Every target write checks the admin's list, which is one settings string for the process'
# lifetime: parsed once, not per write (Rules is frozen, so sharing it is safe).
@functools.lru_cache(maxsize=4)
def parse_rules(text: str) -> Rules:
    """Comma-separated entries: a key (``example.com/owner``, ``team``) or a domain ending in
    ``/`` (``example.com/``: every key in it and its subdomains). ValueError names a bad entry."""
    keys: set[str] = set()
    domains: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry.endswith("/"):
            domain = entry[:-1]
            if not _is_domain(domain):
                raise ValueError(f"forbidden target key entry {entry!r}: not a DNS domain followed by '/'")
            domains.add(domain)
        elif _is_key(entry):
            keys.add(entry)
        else:
            raise ValueError(
                f"forbidden target key entry {entry!r}: not a label/annotation key ([domain/]name)"
                " nor a domain ending in '/'"
            )
    return Rules(keys=frozenset(keys), domains=frozenset(domains))


def _is_domain(domain: str) -> bool:
    return 0 < len(domain) <= _DOMAIN_MAX and _DOMAIN_RE.match(domain) is not None


def _is_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or _is_domain(prefix)) and _NAME_RE.match(name) is not None


def _in_domain(domain: str, domains: Iterable[str]) -> bool:
    return any(domain == d or domain.endswith("." + d) for d in domains)


def key_reader(key: str, rules: Rules = NO_RULES) -> str | None:
    """Who acts on a label/annotation ``key`` (so no SecretSync may set it), or None if nobody."""
    domain = key.rpartition("/")[0].lower()
    if key in rules.keys or _in_domain(domain, rules.domains):
        return ADMIN_READER  # the admin's word outranks the descriptive exceptions
    if key in _KNOWN_READERS:
        return _KNOWN_READERS[key]
    if key in DESCRIPTIVE_KEYS:
        return None
    for reserved, reader in RESERVED_DOMAINS.items():
        if _in_domain(domain, (reserved,)):
            return reader
    return None


def label_reader(key: str, value: str, rules: Rules = NO_RULES) -> str | None:
    """``key_reader`` plus Helm's ``owner=helm``, the label that makes a record Helm's."""
    if (key, value) == HELM_OWNER_LABEL:
        return "Helm's release records"
    return key_reader(key, rules)


def type_reader(secret_type: str) -> str | None:
    """Who acts on Secrets of ``secret_type`` beyond holding data, or None (Opaque, the user types)."""
    if secret_type in USER_SECRET_TYPES:
        return None
    domain = secret_type.rpartition("/")[0].lower()
    for reserved, reader in RESERVED_DOMAINS.items():
        if _in_domain(domain, (reserved,)):
            return reader
    return None


def domain_pattern() -> str:
    """RE2/Python regex matching a key or type whose domain is reserved (``_in_domain``), for
    the CRD's CEL rules: ``kubernetes.io/x`` and ``node.kubernetes.io/x``, not ``notkubernetes.io/x``."""
    alternatives = "|".join(domain.replace(".", "[.]") for domain in RESERVED_DOMAINS)
    return f"^([^/]*[.])?({alternatives})/"
