"""Every example, applied with server-side apply and acted on by the operator, shows no drift.

What GitOps tools do (Argo CD with ServerSideDiff, Flux's kustomize-controller): apply the manifest
with server-side apply, then compare it to the live object with a server-side dry run. A field the
apiserver defaults (our CRDs carry ``default:`` markers), or that the operator writes into an object
the user applied (finalizers, kopf's bookkeeping annotations, status), must not read as drift, or the
application stays OutOfSync forever (ESO #6398, #6797, #6887).

Prerequisites the examples name but do not create, set up here so that every example reaches the
state it describes (its happy path, or the refusal it shows on purpose): the dev server seeded with
examples/demo-seed.yaml (its Kubernetes-auth identities pointed at this control plane, as
hack/demo.py does) plus what the seed lacks: the files secretsync-binary.yaml says to store, the
/db folder of generators.yaml, the grantee and the granter's admin role of temporaryprivilege.yaml,
and for dynamicsecretlease.yaml a project ``payments-api`` with the dynamic secret ``app-db`` (a
throwaway PostgreSQL), namespace ``payments`` and its identity ``payments-identity``. Nothing is
skipped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import yaml

from secretferry.devcluster.cluster import ISSUER, ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver import pgcluster
from secretferry.devserver.testing import DevServer, run_dev_server

pytestmark = pytest.mark.skipif(
    pgcluster.unavailable_reason() is not None, reason=str(pgcluster.unavailable_reason())
)

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
# Not a manifest: the dev server's seed (used below as the service's data).
SEED = EXAMPLES / "demo-seed.yaml"
# One field manager for apply and diff, as a GitOps controller uses one (kubectl diff's own default
# differs from apply's).
MANAGER = "gitops"
GROUP = "secretferry.io"
# examples/temporaryprivilege.yaml's grantee, and the identity examples/dynamicsecretlease.yaml leases
# as (both fake, for this test only).
GRANTEE_ID = "00000000-0000-4000-8000-00000000d001"
PAYMENTS_ID = "5ec7f000-0000-4000-8000-0000000000c1"
PAYMENTS_CLIENT, PAYMENTS_SECRET = "payments-client-id", "payments-client-secret-fake"
# What the examples expect where it is not success: both on purpose (see the files).
REFUSED = {
    "SecretSync sandbox/payments": "False/IdentityNotAllowed",
    "ClusterSecretSync -/shop-payments": "False/NamespacesFailed",
}


def _complete(seed: dict[str, Any], pg: pgcluster.PgCluster, cp: ControlPlane) -> None:
    """What the examples need beyond demo-seed.yaml (module docstring)."""
    shop = next(p for p in seed["projects"] if p["slug"] == "shop")
    keystore = base64.b64encode(b"\x30\x82fake-pkcs12-bytes").decode()
    shop["secrets"] += [
        {"environment": "dev", "path": "/payments", "key": "keystore.p12", "value": keystore},
        {"environment": "dev", "path": "/payments", "key": "KEYSTORE_PASSWORD", "value": "fake-keystore-pw"},
        {"environment": "dev", "path": "/payments", "key": "CERT_DER_B64", "value": "MIIBfakeder"},
        {"environment": "dev", "path": "/db", "key": "DB_NAME", "value": "shop-database"},
    ]
    for ident in seed["identities"]:
        if ident["name"] == "shop-shared-reader":  # the granter must be an admin of the project
            ident["projects"] = [{"project": "shop", "role": "admin"}]
            # examples/oidc-auth.yaml logs in as this identity with OIDC auth, configured at the
            # service as its comments say: this control plane's discovery, the demo audience and
            # the one ServiceAccount as bound subject.
            ident["oidcAuth"] = {
                "oidcDiscoveryUrl": cp.server,
                "caCert": cp.ca_pem,
                "boundIssuer": ISSUER,
                "boundAudiences": "secretferry-demo",
                "boundSubject": "system:serviceaccount:demo:shop-oidc",
                "accessTokenTTL": 3600,
            }
    seed["identities"] += [
        {
            "id": GRANTEE_ID,
            "name": "debug-reader",
            "organization": "demo-org",
            "universalAuth": {"clientId": "debug-reader-client", "clientSecret": "debug-reader-secret"},
            "projects": [{"project": "shop", "role": "no-access"}],
        },
        {
            "id": PAYMENTS_ID,
            "name": "payments",
            "organization": "demo-org",
            "universalAuth": {"clientId": PAYMENTS_CLIENT, "clientSecret": PAYMENTS_SECRET},
            "projects": [{"project": "payments-api", "role": "admin"}],
        },
    ]
    seed["projects"].append(
        {
            "id": "5ec7f000-0000-4000-8000-0000000000a2",
            "slug": "payments-api",
            "name": "Payments API",
            "organization": "demo-org",
            "environments": [{"slug": "prod", "name": "Production"}],
            "dynamicSecrets": [
                {
                    "name": "app-db",
                    "environment": "prod",
                    "path": "/",
                    "type": "sql-database",
                    "defaultTTL": "1h",
                    "maxTTL": "24h",
                    "inputs": pg.inputs(),
                }
            ],
        }
    )


def _payments_identity(cp: ControlPlane) -> None:
    """Namespace payments and the MachineIdentity examples/dynamicsecretlease.yaml names."""
    cp.kubectl("create", "namespace", "payments", check=False)
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "payments-identity",
                "namespace": "payments",
                "annotations": {harness.ALLOWED_IDENTITIES: "payments-identity"},
            },
            "stringData": {"clientSecret": PAYMENTS_SECRET},
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": "payments-identity", "namespace": "payments"},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": PAYMENTS_CLIENT,
                        "clientSecretRef": {"name": "payments-identity", "key": "clientSecret"},
                    }
                }
            },
        }
    )


def manifests() -> list[Path]:
    # namespaces.yaml first: everything else lives in those namespaces.
    files = sorted(p for p in EXAMPLES.glob("*.yaml") if p != SEED)
    return sorted(files, key=lambda p: p.name != "namespaces.yaml")


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def pg() -> Iterator[pgcluster.PgCluster]:
    with pgcluster.throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def service(
    control_plane: ControlPlane,
    reviewer_token: str,
    pg: pgcluster.PgCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    """The demo's seed, its Kubernetes-auth identities reviewing tokens at this control plane."""
    seed = yaml.safe_load(SEED.read_text())
    _complete(seed, pg, control_plane)
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


def _remove_examples(cp: ControlPlane, files: list[Path]) -> None:
    """Take every example away again, while this module's operator still runs (it clears its own
    finalizers), and wait until they are gone: the examples live in fixed namespaces and include
    cluster-scoped objects (a ClusterMachineIdentity, a ClusterSecretSync selecting namespaces by
    label, a TemporaryPrivilege), which every later test's operator would otherwise find and serve
    against its own dev server (logins, lists and streams that test never made)."""
    for path in reversed(files):
        if path.name != "namespaces.yaml":
            cp.kubectl_run("delete", "--ignore-not-found", "--wait=true", "--timeout=90s", "-f", str(path))
    namespaces = [d["metadata"]["name"] for d in documents(EXAMPLES / "namespaces.yaml")]
    cp.kubectl_run(
        "delete", "namespace", "--ignore-not-found", "--wait=true", "--timeout=120s", *namespaces, "payments"
    )


def test_examples_show_no_server_side_drift(control_plane: ControlPlane, operator: OperatorProcess) -> None:
    cp = control_plane
    files = manifests()
    assert len(files) >= 14, [f.name for f in files]  # every example, none forgotten
    try:
        _payments_identity(cp)
        for path in files:
            cp.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", str(path))
        _check_examples(cp, files)
    finally:
        _remove_examples(cp, files)


def _check_examples(cp: ControlPlane, files: list[Path]) -> None:

    ours = [d for path in files for d in documents(path) if d["apiVersion"].startswith(GROUP + "/")]
    assert len(ours) >= 20
    for doc in ours:
        harness.eventually(
            lambda doc=doc: _acted(cp, doc),
            timeout=60,
            what=f"a Ready condition on {doc['kind']} {doc['metadata']['name']}",
        )

    def label(doc: dict[str, Any]) -> str:
        return f"{doc['kind']} {doc['metadata'].get('namespace', '-')}/{doc['metadata']['name']}"

    def as_described(doc: dict[str, Any]) -> bool:
        found = _ready_reason(cp, doc)
        return found == REFUSED[label(doc)] if label(doc) in REFUSED else found.startswith("True/")

    # Each example ends where its comments say: Ready, or refused on purpose.
    try:
        for doc in ours:
            harness.eventually(
                lambda doc=doc: as_described(doc), timeout=60, what=f"{label(doc)} as described"
            )
    finally:
        reasons = {label(d): _ready_reason(cp, d) for d in ours}
        print(json.dumps(reasons, indent=1, sort_keys=True))

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
