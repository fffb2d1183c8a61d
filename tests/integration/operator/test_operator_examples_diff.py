"""Every example, applied with server-side apply and acted on by the operator, shows no drift.

What GitOps tools do (Argo CD with ServerSideDiff, Flux's kustomize-controller): apply the manifest
with server-side apply, then compare it to the live object with a server-side dry run. A field the
apiserver defaults (our CRDs carry ``default:`` markers), or that the operator writes into an object
the user applied (finalizers, kopf's bookkeeping annotations, status), must not read as drift, or the
application stays OutOfSync forever (ESO #6398, #6797, #6887).

Prerequisites the examples name but do not create: the dev server seeded with
examples/demo-seed.yaml (its Kubernetes-auth identities pointed at this control plane, as
hack/demo.py does) and namespace ``payments`` (examples/dynamicsecretlease.yaml). Nothing is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import yaml

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, run_dev_server

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
# Not a manifest: the dev server's seed (used below as the service's data).
SEED = EXAMPLES / "demo-seed.yaml"
# One field manager for apply and diff, as a GitOps controller uses one (kubectl diff's own default
# differs from apply's).
MANAGER = "gitops"
GROUP = "secretferry.io"


def manifests() -> list[Path]:
    # namespaces.yaml first: everything else lives in those namespaces.
    files = sorted(p for p in EXAMPLES.glob("*.yaml") if p != SEED)
    return sorted(files, key=lambda p: p.name != "namespaces.yaml")


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane, reviewer_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    """The demo's seed, its Kubernetes-auth identities reviewing tokens at this control plane."""
    seed = yaml.safe_load(SEED.read_text())
    for ident in seed["identities"]:
        if "kubernetesAuth" in ident:
            ident["kubernetesAuth"].update(
                kubernetesHost=control_plane.server,
                caCert=control_plane.ca_pem,
                tokenReviewerJwt=reviewer_token,
            )
    # The leak check at the operator's teardown looks for these (fake) values.
    harness.VALUES.update(
        s["value"] for p in seed["projects"] for s in p.get("secrets", []) if "${" not in s["value"]
    )
    with run_dev_server(
        seed=seed,
        data_dir=tmp_path_factory.mktemp("devserver-examples"),
        extra_args=["--heartbeat-seconds", "1"],
    ) as server:
        yield server


def _acted(cp: ControlPlane, doc: dict[str, Any]) -> bool:
    """The operator wrote a Ready condition for this generation (or, for kinds that do not record
    observedGeneration on the condition, at all)."""
    meta = doc["metadata"]
    args = ["get", doc["kind"].lower() + "." + GROUP, meta["name"], "-o", "json"]
    if meta.get("namespace"):
        args += ["-n", meta["namespace"]]
    proc = cp.kubectl_run(*args)
    if proc.returncode != 0:
        return False
    live = json.loads(proc.stdout)
    for cond in (live.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            seen = cond.get("observedGeneration", live["metadata"]["generation"])
            return bool(seen == live["metadata"]["generation"])
    return False


def _live(cp: ControlPlane, doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc["metadata"]
    args = ["get", doc["kind"].lower() + "." + GROUP, meta["name"], "-o", "json"]
    if meta.get("namespace"):
        args += ["-n", meta["namespace"]]
    live: dict[str, Any] = json.loads(cp.kubectl(*args))
    return live


def _added(applied: Any, live: Any, path: str = "") -> list[str]:
    """Paths of fields in ``live`` that ``applied`` does not have (lists compared item by item)."""
    if isinstance(applied, dict) and isinstance(live, dict):
        out = []
        for key, value in live.items():
            out += [f"{path}.{key}"] if key not in applied else _added(applied[key], value, f"{path}.{key}")
        return out
    if isinstance(applied, list) and isinstance(live, list):
        return [
            p
            for i, (a, b) in enumerate(zip(applied, live, strict=False))
            for p in _added(a, b, f"{path}[{i}]")
        ]
    return []


def _ready_reason(cp: ControlPlane, doc: dict[str, Any]) -> str:
    live = _live(cp, doc)
    conds = (live.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), {})
    return f"{ready.get('status')}/{ready.get('reason')}"


def test_examples_show_no_server_side_drift(control_plane: ControlPlane, operator: OperatorProcess) -> None:
    cp = control_plane
    cp.kubectl("create", "namespace", "payments", check=False)  # examples/dynamicsecretlease.yaml
    files = manifests()
    assert len(files) >= 14, [f.name for f in files]  # every example, none forgotten
    for path in files:
        cp.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", str(path))

    ours = [d for path in files for d in documents(path) if d["apiVersion"].startswith(GROUP + "/")]
    assert len(ours) >= 20
    for doc in ours:
        harness.eventually(
            lambda doc=doc: _acted(cp, doc),
            timeout=60,
            what=f"a Ready condition on {doc['kind']} {doc['metadata']['name']}",
        )
    # What the operator made of them (for the report; drift is what this test is about, and a
    # failure status is written into the object all the same).
    reasons = {
        f"{d['kind']} {d['metadata'].get('namespace', '-')}/{d['metadata']['name']}": _ready_reason(cp, d)
        for d in ours
    }
    print(json.dumps(reasons, indent=1, sort_keys=True))
    synced = [k for k, v in reasons.items() if k.startswith("SecretSync ") and v == "True/Synced"]
    assert len(synced) >= 8, reasons  # the operator did act: it wrote Secrets, finalizers, status

    # What the diff below has to see through: spec fields the apiserver defaulted (CRD `default:`
    # markers), and metadata the operator wrote (finalizers, kopf's annotations).
    defaulted, written = [], []
    for doc in ours:
        live, name = _live(cp, doc), f"{doc['kind']}/{doc['metadata']['name']}"
        defaulted += [name + p for p in _added(doc.get("spec") or {}, live.get("spec") or {}, ".spec")]
        meta = {k: v for k, v in live["metadata"].items() if k in ("finalizers", "annotations", "labels")}
        written += [name + p for p in _added(doc["metadata"], meta, ".metadata")]
    print(f"{len(defaulted)} defaulted spec fields, {len(written)} metadata fields the operator wrote:")
    print("\n".join(sorted(written)))
    assert len(defaulted) >= 20 and any("finalizers" in w for w in written), (defaulted, written)

    drift = {}
    for path in files:
        proc = cp.kubectl_run("diff", "--server-side", f"--field-manager={MANAGER}", "-f", str(path))
        if proc.returncode != 0:
            drift[path.name] = proc.stdout + proc.stderr
    assert not drift, "\n".join(f"--- {name}\n{text}" for name, text in drift.items())

    # The check can fail: a changed manifest does show as drift (exit code 1).
    changed = (EXAMPLES / "secretsync.yaml").read_text().replace("refreshInterval: 5m", "refreshInterval: 6m")
    assert "6m" in changed
    proc = cp.kubectl_run("diff", "--server-side", f"--field-manager={MANAGER}", "-f", "-", input=changed)
    assert proc.returncode == 1 and "refreshInterval: 6m" in proc.stdout, proc.stdout + proc.stderr
