"""Shared constants and helpers for the chart tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "secretferry"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))

Manifest = dict[str, Any]
Helm = Callable[..., str]
Render = Callable[..., list[Manifest]]


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
    *{("", "secrets", verb) for verb in ("get", "list", "watch", "create", "patch", "delete")},
    *{("", "configmaps", verb) for verb in ("get", "list", "watch", "create", "patch")},
    ("events.k8s.io", "events", "create"),
    ("", "serviceaccounts", "get"),
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
    ("", "namespaces", "get"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
}
# kopf lists and watches namespaces when it serves a list of them (not cluster-wide).
KOPF_NAMESPACE_OBSERVER = {("", "namespaces", "list"), ("", "namespaces", "watch")}


def by_kind(docs: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: Sequence[Manifest], kind: str) -> Manifest:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


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
