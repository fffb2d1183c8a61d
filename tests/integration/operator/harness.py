"""Helpers for operator tests: the dev server seed, custom resources, and waiting for outcomes."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, kubernetes_auth, run_dev_server

# One polling helper for every integration test; re-exported for the operator and chart tests.
from waiting import eventually as eventually

ORG_ID = "0f000000-0000-4000-8000-000000000001"
PROJECT_ID = "0f000000-0000-4000-8000-0000000000a1"
PROJECT_SLUG = "app"
IDENTITY_ID = "0f000000-0000-4000-8000-0000000000b1"
UNIVERSAL_ID = "0f000000-0000-4000-8000-0000000000b2"
AUDIENCE = "secretferry-test"
# On a ServiceAccount or Secret: the MachineIdentities that may use it (reconcile/tenancy.py).
ALLOWED_IDENTITIES = "secretferry.io/allowed-identities"
# Beside it: the MachineIdentities whose SecretSyncs may use templates (reconcile/template_trust.py).
ALLOW_TEMPLATES = "secretferry.io/allow-templates"
OPERATOR_NAMESPACE = "secretferry-system"


def seed(cp: ControlPlane, *, reviewer_token: str) -> dict[str, Any]:
    """One project with dev/prod, a Kubernetes-auth identity checked by a real TokenReview."""
    return {
        "organizations": [{"id": ORG_ID, "name": "Test org", "slug": "test-org"}],
        "projects": [
            {
                "id": PROJECT_ID,
                "slug": PROJECT_SLUG,
                "name": "App",
                "organization": "test-org",
                "environments": [{"slug": "dev", "name": "Dev"}, {"slug": "prod", "name": "Prod"}],
            }
        ],
        "identities": [
            {
                "id": IDENTITY_ID,
                "name": "operator",
                "organization": "test-org",
                "kubernetesAuth": kubernetes_auth(
                    host=cp.server,
                    ca_pem=cp.ca_pem,
                    reviewer_token=reviewer_token,
                    audience=AUDIENCE,
                    accessTokenTTL=3600,
                    accessTokenMaxTTL=86400,
                ),
                "projects": [{"project": PROJECT_SLUG, "role": "admin"}],
            },
            {
                "id": UNIVERSAL_ID,
                "name": "universal",
                "organization": "test-org",
                "universalAuth": {"clientId": "test-client", "clientSecret": "test-client-secret"},
                "projects": [{"project": PROJECT_SLUG, "role": "admin"}],
            },
        ],
    }


def get(cp: ControlPlane, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    proc = cp.kubectl_run("get", kind, name, "-n", namespace, "-o", "json")
    if proc.returncode != 0:
        if "NotFound" in proc.stderr:
            return None
        raise RuntimeError(proc.stderr)
    obj: dict[str, Any] = json.loads(proc.stdout)
    return obj


def secret_data(cp: ControlPlane, namespace: str, name: str) -> dict[str, str] | None:
    obj = get(cp, "secret", name, namespace)
    if obj is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


def ready(cp: ControlPlane, namespace: str, name: str, kind: str = "secretsync") -> dict[str, Any] | None:
    obj = get(cp, kind, name, namespace)
    if obj is None:
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def wait_reason(
    cp: ControlPlane, namespace: str, name: str, reason: str, *, timeout: float = 30.0
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        cond = ready(cp, namespace, name)
        return cond if cond and cond.get("reason") == reason else None

    return eventually(check, timeout=timeout, what=f"{namespace}/{name} Ready reason {reason}")


def opt_ins(name: str, *, templates: bool) -> dict[str, str]:
    """The annotations of a credential object that admits MachineIdentity ``name`` (and, with
    ``templates``, its SecretSyncs' templates)."""
    return {ALLOWED_IDENTITIES: name, **({ALLOW_TEMPLATES: name} if templates else {})}


def kubernetes_identity(
    cp: ControlPlane, namespace: str, name: str = "ferry", *, sa: str = "ferry-sa", templates: bool = False
) -> None:
    """A ServiceAccount that opted in to MachineIdentity ``name`` (and, with ``templates``, to
    templates over what it reads), and that identity."""
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": sa,
                "namespace": namespace,
                "annotations": opt_ins(name, templates=templates),
            },
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "auth": {
                    "kubernetes": {
                        "identityId": IDENTITY_ID,
                        "serviceAccountRef": {"name": sa},
                        "audiences": [AUDIENCE],
                    }
                }
            },
        }
    )


def universal_identity(
    cp: ControlPlane, namespace: str, name: str = "uni", *, templates: bool = False
) -> None:
    """A client-secret Secret that opted in to MachineIdentity ``name`` (and, with ``templates``,
    to templates), and that universal-auth identity (the seed's ``test-client``)."""
    cp.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{name}-creds",
                "namespace": namespace,
                "annotations": opt_ins(name, templates=templates),
            },
            "stringData": {"clientSecret": "test-client-secret"},
        }
    )
    cp.apply(
        {
            "apiVersion": "secretferry.io/v1alpha1",
            "kind": "MachineIdentity",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "auth": {
                    "universal": {
                        "clientId": "test-client",
                        "clientSecretRef": {"name": f"{name}-creds", "key": "clientSecret"},
                    }
                }
            },
        }
    )


def secret_sync(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    sources: list[dict[str, Any]],
    target: dict[str, Any] | None = None,
    identity: str = "ferry",
    identity_kind: str = "MachineIdentity",
    **spec: Any,
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"identityRef": {"kind": identity_kind, "name": identity}, "sources": sources, **spec},
    }
    if target is not None:
        body["spec"]["target"] = target
    cp.apply(body)


def source(path: str, **extra: Any) -> dict[str, Any]:
    return {"projectId": PROJECT_ID, "environment": "dev", "path": path, **extra}


def start_operator(
    control_plane: ControlPlane, service: DevServer, log_path: Path, **env: str
) -> OperatorProcess:
    op = OperatorProcess(
        kubeconfig=control_plane.kubeconfig,
        log_path=log_path,
        env={
            "SECRETFERRY_NAMESPACE": OPERATOR_NAMESPACE,
            "SECRETFERRY_DEFAULT_HOST_API": service.base_url,
            "SECRETFERRY_LOG_LEVEL": "DEBUG",
            "SECRETFERRY_BACKOFF_INITIAL_SECONDS": "0.5",
            "SECRETFERRY_BACKOFF_MAX_SECONDS": "3",
            "SECRETFERRY_STREAM_HEARTBEAT_SECONDS": "1",
            "SECRETFERRY_ROLLOUT_COOLDOWN_SECONDS": "5",
            **env,
        },
    )
    op.start()
    return op


# Every secret value a test puts into the dev server; none may show up outside a Secret.
VALUES: set[str] = set()


def record_values(server: DevServer) -> None:
    """Wrap ``set_secret`` so that every value written in a test is remembered."""
    original = server.set_secret

    def recording(project_id: str, env: str, path: str, key: str, value: str, **extra: Any) -> dict[str, Any]:
        VALUES.add(value)
        return original(project_id, env, path, key, value, **extra)

    server.set_secret = recording  # type: ignore[method-assign]


@contextlib.contextmanager
def dev_server(
    cp: ControlPlane, *, reviewer_token: str, data_dir: Path, extra_args: Sequence[str] = ()
) -> Iterator[DevServer]:
    """The dev server with this module's ``seed`` for ``cp``, every value it is given recorded
    (``record_values``): what each test module's dev-server fixture starts, with its own flags."""
    with run_dev_server(
        seed=seed(cp, reviewer_token=reviewer_token), data_dir=data_dir, extra_args=extra_args
    ) as server:
        record_values(server)
        yield server


def _kubectl_all(cp: ControlPlane, *resources: str) -> str:
    out = []
    for resource in resources:
        out.append(cp.kubectl("get", resource, "-A", "-o", "json", check=False))
    return "\n".join(out)


def assert_no_values_leaked(cp: ControlPlane, op: OperatorProcess) -> None:
    """The operator's whole log, every Event and every custom resource's status hold no value."""
    haystacks = {
        "operator log": op.log_text(),
        "events": _kubectl_all(cp, "events.events.k8s.io", "events"),
        "custom resources": _kubectl_all(
            cp,
            "secretsyncs",
            "machineidentities",
            "clustermachineidentities",
            "passwordgenerators",
            "uuidgenerators",
            "clustersecretsyncs",
            "pushsecrets",
        ),
    }
    values = sorted(v for v in VALUES if len(v) >= 6)  # short values would match unrelated text
    assert values, "no values were recorded: the leak check would prove nothing"
    for where, text in haystacks.items():
        leaked = [v for v in values if v in text]
        assert not leaked, f"{len(leaked)} secret value(s) found in the {where}"
