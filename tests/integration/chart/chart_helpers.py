"""Shared constants and helpers for the chart tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "secretferry"
CI = CHART / "ci"
CI_VALUES = sorted(CI.glob("*-values.yaml"))

Manifest = dict[str, Any]
Helm = Callable[..., str]
Render = Callable[..., list[Manifest]]


@dataclass
class Installed:
    release: str
    namespace: str  # the release namespace, where the operator "runs"
    service_account: str
    deployment_env: dict[str, str]  # the operator container's env, fieldRefs resolved


# Exactly what the operator calls (kube/*.py, kopf's watches), verb by verb: a verb added here
# must come with a call that needs it, and README's RBAC section says why.
NAMESPACED_RULES = {
    *{
        ("secretferry.io", kind, verb)
        for kind in ("secretsyncs", "machineidentities")
        for verb in ("list", "watch")
    },
    ("secretferry.io", "secretsyncs/status", "patch"),
    ("secretferry.io", "machineidentities/status", "patch"),
    # PasswordGenerators and UUIDGenerators: our own watch, the get of a SecretSync's generatorRef.
    *{
        ("secretferry.io", kind, verb)
        for kind in ("passwordgenerators", "uuidgenerators")
        for verb in ("get", "list", "watch")
    },
    ("secretferry.io", "passwordgenerators/status", "patch"),
    ("secretferry.io", "uuidgenerators/status", "patch"),
    # DynamicSecretLease: kopf's watch, its finalizer and progress annotations, and status.
    *{("secretferry.io", "dynamicsecretleases", verb) for verb in ("list", "watch", "patch")},
    ("secretferry.io", "dynamicsecretleases/status", "patch"),
    *{("secretferry.io", "pushsecrets", verb) for verb in ("list", "watch", "patch")},
    ("secretferry.io", "pushsecrets/status", "patch"),
    *{("", "secrets", verb) for verb in ("get", "list", "watch", "create", "patch", "delete")},
    *{("", "configmaps", verb) for verb in ("get", "list", "watch", "create", "patch")},
    ("events.k8s.io", "events", "create"),
    *{("", "serviceaccounts", verb) for verb in ("get", "list", "watch")},  # list/watch: opt-in watch
    ("events.k8s.io", "events", "patch"),
    ("", "serviceaccounts/token", "create"),
    *{
        ("apps", kind, verb)
        for kind in ("deployments", "statefulsets", "daemonsets")
        for verb in ("list", "patch")
    },
    ("argoproj.io", "rollouts", "list"),
    ("argoproj.io", "rollouts", "patch"),
}
CLUSTER_RULES = {
    ("secretferry.io", "clustermachineidentities", "list"),
    ("secretferry.io", "clustermachineidentities", "watch"),
    ("secretferry.io", "clustermachineidentities/status", "patch"),
    ("secretferry.io", "clustersecretsyncs", "list"),
    ("secretferry.io", "clustersecretsyncs", "watch"),
    ("secretferry.io", "clustersecretsyncs/status", "patch"),
    # TemporaryPrivileges: watched, our finalizer patched on and off, status written.
    ("secretferry.io", "temporaryprivileges", "list"),
    ("secretferry.io", "temporaryprivileges", "watch"),
    ("secretferry.io", "temporaryprivileges", "patch"),
    ("secretferry.io", "temporaryprivileges/status", "patch"),
    # get, and a metadata-only watch of labels (allowedNamespaces selectors), in both modes.
    *{("", "namespaces", verb) for verb in ("get", "list", "watch")},
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
}
# kopf lists and watches namespaces when it serves a list of them (not cluster-wide); the
# operator's own label watch needs the same in both modes, so CLUSTER_RULES holds them already.
KOPF_NAMESPACE_OBSERVER = {("", "namespaces", "list"), ("", "namespaces", "watch")}


def by_kind(docs: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: Sequence[Manifest], kind: str) -> Manifest:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def named(docs: Sequence[Manifest], kind: str, name: str) -> Manifest:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, got {len(found)}"
    return found[0]


def rule_triples(role: Manifest) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples of a Role or ClusterRole, for exact comparisons."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def operator_container(docs: Sequence[Manifest]) -> dict[str, Any]:
    """The operator's one container (a second one would change what every env check means)."""
    containers = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    found: dict[str, Any] = containers[0]
    return found


def operator_env(docs: Sequence[Manifest]) -> dict[str, Any]:
    """The container's environment: a plain value as its string, otherwise its ``valueFrom``."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in operator_container(docs)["env"]}


def set_args(set_values: Sequence[str]) -> list[str]:
    """``--set`` flags for helm, one a value."""
    return [arg for s in set_values for arg in ("--set", s)]


def assert_refused(helm: Helm, set_values: Sequence[str], message: str) -> None:
    """``helm template`` with these values fails, and its error names ``message``."""
    out = helm("template", "ci", str(CHART), *set_args(set_values), check=False)
    assert "Error" in out and message in out, out


def operator_harness() -> Any:
    """The operator tests' ``harness`` module (dev server seed, CR helpers, ``eventually``).

    Imported by name so that a session which also ran the operator tests shares one module object.
    """
    import importlib
    import sys

    here = str(ROOT / "tests" / "integration" / "operator")
    if here not in sys.path:
        sys.path.append(here)
    return importlib.import_module("harness")
