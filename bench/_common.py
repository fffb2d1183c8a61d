"""Shared pieces of the operator benchmarks: a real control plane, the dev server, the operator.

Nothing here is mocked: ``cluster.start`` runs etcd + kube-apiserver + kube-controller-manager, the
dev server runs as a subprocess with a Kubernetes-auth identity checked by a real TokenReview, and
the operator runs as ``secretferry run`` in its own process. The benchmark process talks to the
apiserver with aiohttp and the admin client certificate (bulk creation, watches), so its own
overhead stays small on a 2-core machine.

Every report starts with ``RunInfo.header()``: the machine, its load, the commit and the control
plane's profile (``--control-plane``, ``cluster.PROFILES``) with the flags it adds, so that a figure
is never read without the settings it was measured with.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from secretferry.devcluster import cluster
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer, kubernetes_auth, run_dev_server
from secretferry.models import labels


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (a killed `make bench`) unwinds like Ctrl-C, so the control plane, dev server and
    operator started here are stopped instead of left running."""
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _exit_on_sigterm)

REPO = Path(__file__).resolve().parents[1]
ORG_ID = "0f000000-0000-4000-8000-000000000001"
PROJECT_ID = "0f000000-0000-4000-8000-0000000000a1"
PROJECT_SLUG = "app"
IDENTITY_ID = "0f000000-0000-4000-8000-0000000000b1"
AUDIENCE = "secretferry-bench"
OPERATOR_NAMESPACE = "secretferry-system"
CLUSTER_IDENTITY = "bench-ferry"
SYNCS_PATH = "/apis/secretferry.io/v1alpha1/secretsyncs"
MANAGED_SELECTOR = f"{labels.MANAGED_BY_LABEL}={labels.MANAGED_BY_VALUE}"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load()}] {msg}", file=sys.stderr, flush=True)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# --- what a figure was measured with -----------------------------------------------------------------
def describe_flags(flags: cluster.ProfileFlags) -> str:
    """The profile's flags that differ from the binaries' defaults, per binary."""
    parts = [
        f"{binary} {' '.join(args)}"
        for binary, args in (("etcd", flags.etcd), ("kube-apiserver", flags.kube_apiserver))
        if args
    ]
    return (
        "; ".join(parts)
        or "none (etcd fsyncs every commit, API priority and fairness on, default in-flight limits)"
    )


def add_control_plane_option(parser: argparse.ArgumentParser) -> None:
    """``--control-plane {tuned,production}``: the README's figures use ``tuned``; ``production``
    shows what they cost without its shortcuts."""
    profiles = get_args(cluster.Profile)
    parser.add_argument(
        "--control-plane",
        choices=profiles,
        default="tuned",
        help="control-plane profile and the flags it adds: "
        + "; ".join(f"{name}: {describe_flags(cluster.PROFILES[name])}" for name in profiles)
        + " (default: tuned, the README's figures)",
    )


def _first_line(argv: Sequence[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        # 30 s: a --version or rev-parse answers in milliseconds; this only bounds a hung binary.
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    return "unknown"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


@dataclass
class RunInfo:
    """What a reader needs next to a figure: the machine, how loaded it was, the code and the
    control plane's settings. Printed at the top of every report (``header``)."""

    profile: cluster.Profile | None  # None: the script starts no control plane
    load_at_start: str = field(default_factory=load)
    versions: str = ""  # the control plane's binaries, filled in by start_control_plane

    def header(self) -> str:
        cores, usable = os.cpu_count(), len(os.sched_getaffinity(0))
        commit = _first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
        lines = [
            f"machine: {_cpu_model()}, {cores} cores ({usable} usable); load average (1/5/15 min) "
            f"{self.load_at_start} at start, {load()} at this report",
            f"code: commit {commit}; python {platform.python_version()}",
        ]
        if self.profile is None:
            lines.append("control plane: none")
        else:
            versions = f" ({self.versions})" if self.versions else ""
            lines.append(
                f"control plane: profile {self.profile}{versions}; non-default flags: "
                + describe_flags(cluster.PROFILES[self.profile])
            )
        return "\n".join(lines) + "\n"


def start_control_plane(workdir: Path, run: RunInfo) -> cluster.ControlPlane:
    """``cluster.start`` with the run's profile; notes the binaries' versions for the header."""
    assert run.profile is not None, "a run that starts a control plane names its profile"
    log(f"starting control plane ({run.profile}) in {workdir}")
    cp = cluster.start(workdir, profile=run.profile)
    apiserver = _first_line([str(cp.bin_dir / "kube-apiserver"), "--version"])
    etcd = _first_line([str(cp.bin_dir / "etcd"), "--version"])
    # "Kubernetes v1.34.4" and "etcd Version: 3.6.6" -> "kube-apiserver v1.34.4, etcd v3.6.6"
    run.versions = (
        f"{apiserver.replace('Kubernetes ', 'kube-apiserver ')}, {etcd.replace('etcd Version: ', 'etcd v')}"
    )
    return cp


# --- /proc figures ---------------------------------------------------------------------------------
def proc_status_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def rss_mib(pid: int) -> float:
    return proc_status_kib(pid, "VmRSS") / 1024


def peak_rss_mib(pid: int) -> float:
    return proc_status_kib(pid, "VmHWM") / 1024


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def op_pid(op: OperatorProcess) -> int:
    assert op._proc is not None
    return op._proc.pid


# --- Prometheus text ---------------------------------------------------------------------------------
def metric(text: str, name: str, label: str = "") -> float:
    """Sum of the samples of ``name`` (exact metric name) whose label text contains ``label``."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric_name = head.split("{", 1)[0]
        if metric_name == name and label in head:
            total += float(value)
    return total


def safe_metrics(op: OperatorProcess) -> str:
    try:
        return op.metrics()
    except OSError:
        return ""


# --- the environment ---------------------------------------------------------------------------------
def seed_doc(
    cp: cluster.ControlPlane, *, reviewer_token: str, secrets: list[dict[str, str]], audience: str = AUDIENCE
) -> dict[str, Any]:
    return {
        "organizations": [{"id": ORG_ID, "name": "Bench org", "slug": "bench-org"}],
        "projects": [
            {
                "id": PROJECT_ID,
                "slug": PROJECT_SLUG,
                "name": "App",
                "organization": "bench-org",
                "environments": [{"slug": "dev", "name": "Dev"}],
                "secrets": secrets,
            }
        ],
        "identities": [
            {
                "id": IDENTITY_ID,
                "name": "operator",
                "organization": "bench-org",
                "kubernetesAuth": kubernetes_auth(
                    host=cp.server,
                    ca_pem=cp.ca_pem,
                    reviewer_token=reviewer_token,
                    audience=audience,
                    accessTokenTTL=3600,
                    accessTokenMaxTTL=86400,
                ),
                "projects": [{"project": PROJECT_SLUG, "role": "admin"}],
            }
        ],
    }


@dataclass
class Env:
    cp: cluster.ControlPlane
    service: DevServer
    workdir: Path
    operators: list[OperatorProcess] = field(default_factory=list)

    def start_operator(self, name: str, **env: str) -> OperatorProcess:
        op = OperatorProcess(
            kubeconfig=self.cp.kubeconfig,
            log_path=self.workdir / f"{name}.log",
            env={
                "SECRETFERRY_NAMESPACE": OPERATOR_NAMESPACE,
                "SECRETFERRY_DEFAULT_HOST_API": self.service.base_url,
                "SECRETFERRY_LOG_LEVEL": "INFO",
                **env,
            },
        )
        self.operators.append(op)
        op.start(wait_seconds=120)
        return op


@contextlib.contextmanager
def environment(
    *,
    secrets: list[dict[str, str]],
    run: RunInfo,
    devserver_args: Sequence[str] = (),
    keep: bool = False,
    server_ignores_audience: bool = False,
) -> Iterator[Env]:
    """A fresh control plane (CRDs, operator namespace, a cluster identity) and a seeded dev server.

    ``server_ignores_audience``: the dev server reviews tokens without audiences (the
    ``selfhosted-2024-10`` profile), so the cluster identity sends an apiserver-audience token
    (``allowAPIServerAudience``, README's warning) and the seed allows no audience: the only way
    Kubernetes auth logs in to such a server."""
    workdir = Path(tempfile.mkdtemp(prefix="secretferry-bench-"))
    cp = start_control_plane(workdir / "cp", run)
    try:
        for path in sorted((REPO / "crds").glob("*.yaml")):
            cp.kubectl("apply", "--server-side", "-f", str(path))
        cp.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        cp.kubectl("create", "namespace", OPERATOR_NAMESPACE)
        cp.kubectl("create", "serviceaccount", "bench-sa", "-n", OPERATOR_NAMESPACE)
        cp.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "ClusterMachineIdentity",
                "metadata": {"name": CLUSTER_IDENTITY},
                "spec": {
                    # The admin lets its SecretSyncs use templates (bench_template_bomb renders them);
                    # without it they would be TemplatesNotAllowed.
                    "allowTemplates": True,
                    "auth": {
                        "kubernetes": {
                            "identityId": IDENTITY_ID,
                            "serviceAccountRef": {"name": "bench-sa", "namespace": OPERATOR_NAMESPACE},
                            **(
                                {"audiences": [], "allowAPIServerAudience": True}
                                if server_ignores_audience
                                else {"audiences": [AUDIENCE]}
                            ),
                        }
                    },
                },
            }
        )
        token = cp.reviewer_token(expiration_seconds=24 * 3600)
        log(f"control plane up; starting dev server with {len(secrets)} secrets")
        with run_dev_server(
            seed=seed_doc(
                cp,
                reviewer_token=token,
                secrets=secrets,
                audience="" if server_ignores_audience else AUDIENCE,
            ),
            data_dir=workdir / "devserver",
            extra_args=list(devserver_args),
        ) as service:
            env = Env(cp=cp, service=service, workdir=workdir)
            try:
                yield env
            finally:
                for op in env.operators:
                    op.stop()
    finally:
        cp.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def secret_sync_body(
    namespace: str,
    name: str,
    *,
    path: str,
    refresh: str = "5m",
    instant: bool = True,
    recursive: bool = False,
) -> dict[str, Any]:
    source: dict[str, Any] = {"projectId": PROJECT_ID, "environment": "dev", "path": path}
    if recursive:
        source["recursive"] = True
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": CLUSTER_IDENTITY},
            "sources": [source],
            "refreshInterval": refresh,
            "instantUpdates": instant,
        },
    }


# --- scoped change-latency runs (bench_streams, bench_webhook) -------------------------------------------
@dataclass(frozen=True)
class ScopeLayout:
    """Scope ``j`` reads folder ``<root>/sNN`` of ``dev``; odd scopes are recursive, and a change of
    one lands in its subfolder ``deep`` (what only a recursive read sees), of an exact one in the
    folder itself."""

    root: str

    def path(self, j: int) -> str:
        return f"{self.root}/s{j:02d}"

    def is_recursive(self, j: int) -> bool:
        return j % 2 == 1

    def kind(self, j: int) -> str:
        return "recursive" if self.is_recursive(j) else "exact"

    def change_path(self, j: int) -> str:
        """Where a change of scope j is written: a subfolder for the recursive scopes."""
        return self.path(j) + "/deep" if self.is_recursive(j) else self.path(j)

    def seed_secrets(self, scopes: int, key: str) -> list[dict[str, str]]:
        """``key`` (``v0``) where each scope's changes land, and three static keys in each folder."""
        secrets = [
            {"environment": "dev", "path": self.change_path(j), "key": key, "value": "v0"}
            for j in range(scopes)
        ]
        secrets += [
            {"environment": "dev", "path": self.path(j), "key": f"STATIC_{k}", "value": f"static-{j}-{k}"}
            for j in range(scopes)
            for k in range(3)
        ]
        return secrets

    async def create_syncs(
        self, api: Api, namespace: str, *, syncs: int, scopes: int, refresh: str
    ) -> dict[int, list[str]]:
        """``namespace`` and ``syncs`` SecretSyncs in it, round-robin over the scopes; their names
        per scope."""
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        by_scope: dict[int, list[str]] = {j: [] for j in range(scopes)}
        bodies = []
        for i in range(syncs):
            j = i % scopes
            name = f"s{j:02d}-{i // scopes:03d}"
            by_scope[j].append(name)
            bodies.append(
                secret_sync_body(
                    namespace, name, path=self.path(j), refresh=refresh, recursive=self.is_recursive(j)
                )
            )
        await api.gather_limited([lambda b=b: api.create(b) for b in bodies])
        log(f"created {syncs} SecretSyncs over {scopes} scopes")
        return by_scope


class SecretWatcher:
    """When each (Secret name, value of ``key``) was first seen by our watch."""

    def __init__(self, key: str = "VALUE") -> None:
        self.key = key
        self.seen: dict[tuple[str, str], float] = {}
        self._waiters: dict[tuple[str, str], asyncio.Event] = {}
        self.synced = asyncio.Event()

    def handle(self, typ: str, obj: dict[str, Any]) -> None:
        if typ == "DELETED":
            return
        name = (obj.get("metadata") or {}).get("name", "")
        value = decode(obj, self.key)
        if value is None or (name, value) in self.seen:
            return
        self.seen[(name, value)] = time.monotonic()
        waiter = self._waiters.pop((name, value), None)
        if waiter is not None:
            waiter.set()

    async def wait(self, name: str, value: str, limit_s: float) -> float | None:
        if (name, value) not in self.seen:
            event = self._waiters.setdefault((name, value), asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), limit_s)
        return self.seen.get((name, value))


async def watch_syncs_and_secrets(
    api: Api, namespace: str, tracker: SyncTracker, watcher: SecretWatcher, tasks: list[asyncio.Task[None]]
) -> None:
    """Every SecretSync into ``tracker``, the managed Secrets of ``namespace`` into ``watcher``;
    returns once both have listed. The watch tasks go into ``tasks`` at once: the caller cancels
    them, even when this is interrupted."""
    tasks.append(asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced)))
    secrets_path = f"/api/v1/namespaces/{namespace}/secrets"
    tasks.append(
        asyncio.create_task(
            api.watch(secrets_path, watcher.handle, watcher.synced, label_selector=MANAGED_SELECTOR)
        )
    )
    await tracker.synced.wait()
    await watcher.synced.wait()


# --- async apiserver client --------------------------------------------------------------------------
class Api:
    """aiohttp against the apiserver as admin: bulk writes and LIST+WATCH for the benchmark."""

    def __init__(self, cp: cluster.ControlPlane) -> None:
        self.cp = cp
        self.session = aiohttp.ClientSession(
            base_url=cp.server,
            connector=aiohttp.TCPConnector(ssl=cp.ssl_context(), limit=128),
            read_bufsize=1 << 20,
        )

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        ok: tuple[int, ...] = (200, 201),
    ) -> Any:
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            method, path, data=data, headers={"Content-Type": content_type}
        ) as resp:
            text = await resp.text()
            if resp.status not in ok:
                raise RuntimeError(f"{method} {path}: {resp.status} {text[:300]}")
            return json.loads(text) if text else None

    async def create(self, body: Mapping[str, Any]) -> Any:
        meta = body["metadata"]
        if body["kind"] == "Namespace":
            path = "/api/v1/namespaces"
        elif body["kind"] == "SecretSync":
            path = f"/apis/secretferry.io/v1alpha1/namespaces/{meta['namespace']}/secretsyncs"
        else:
            raise ValueError(body["kind"])
        return await self.request("POST", path, body)

    async def merge_patch_sync(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Any:
        return await self.request(
            "PATCH",
            f"/apis/secretferry.io/v1alpha1/namespaces/{namespace}/secretsyncs/{name}",
            patch,
            content_type="application/merge-patch+json",
        )

    async def gather_limited(self, calls: Sequence[Callable[[], Awaitable[Any]]], limit: int = 48) -> None:
        sem = asyncio.Semaphore(limit)

        async def one(call: Callable[[], Awaitable[Any]]) -> None:
            async with sem:
                for attempt in range(5):
                    try:
                        await call()
                        return
                    except (aiohttp.ClientError, RuntimeError) as exc:
                        if attempt == 4 or "409" in str(exc):
                            raise
                        await asyncio.sleep(0.5 * (attempt + 1))

        await asyncio.gather(*(one(c) for c in calls))

    async def watch(
        self,
        path: str,
        handle: Callable[[str, dict[str, Any]], None],
        synced: asyncio.Event,
        *,
        label_selector: str | None = None,
    ) -> None:
        """LIST then WATCH forever (410 Gone → relist); ``handle(type, object)`` per event."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        rv: str | None = None
        while True:
            if rv is None:
                listing = await self.request("GET", path + "?" + _qs(params))
                for item in listing.get("items") or []:
                    handle("ADDED", item)
                rv = listing["metadata"]["resourceVersion"]
                synced.set()
            q = {**params, "watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
            q["timeoutSeconds"] = "900"
            try:
                async with self.session.get(
                    path + "?" + _qs(q), timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
                ) as resp:
                    if resp.status == 410:
                        rv = None
                        continue
                    if resp.status != 200:
                        raise RuntimeError(f"watch {path}: {resp.status}")
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event["type"] == "ERROR":
                            if obj.get("code") == 410:
                                rv = None
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if event["type"] != "BOOKMARK":
                            handle(event["type"], obj)
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)


def _qs(params: Mapping[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


def ready_condition(obj: Mapping[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


class SyncTracker:
    """Watches every SecretSync; remembers when each first became Ready and its updateMode."""

    def __init__(self) -> None:
        self.ready: set[tuple[str, str]] = set()
        self.first_ready: dict[tuple[str, str], float] = {}
        self.mode: dict[tuple[str, str], str] = {}
        self.known: set[tuple[str, str]] = set()
        self._waiters: dict[tuple[str, str], asyncio.Event] = {}
        self.synced = asyncio.Event()

    def handle(self, typ: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if typ == "DELETED":
            self.known.discard(key)
            self.ready.discard(key)
            return
        self.known.add(key)
        self.mode[key] = (obj.get("status") or {}).get("updateMode") or ""
        if ready_condition(obj):
            if key not in self.ready:
                self.ready.add(key)
                self.first_ready.setdefault(key, time.monotonic())
                waiter = self._waiters.get(key)
                if waiter is not None:
                    waiter.set()
        else:
            self.ready.discard(key)

    async def wait_ready(self, key: tuple[str, str], limit_s: float) -> float | None:
        """Monotonic time the key was first seen Ready, or None after ``timeout``."""
        if key not in self.first_ready:
            event = self._waiters.setdefault(key, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), limit_s)
        return self.first_ready.get(key)

    async def wait_until(self, check: Callable[[], bool], limit_s: float, poll: float = 0.2) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if check():
                return True
            await asyncio.sleep(poll)
        return check()


def decode(obj: Mapping[str, Any], key: str) -> str | None:
    raw = (obj.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw is not None else None


# --- output ---------------------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt_s(seconds: float | None) -> str:
    return "timeout" if seconds is None else f"{seconds:.2f} s"


def fmt_ms(seconds: float | None) -> str:
    return "timeout" if seconds is None else f"{seconds * 1000:.0f} ms"


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]
