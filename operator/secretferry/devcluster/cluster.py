"""A real local control plane (etcd + kube-apiserver + kube-controller-manager) as plain processes.

Why not envtest or kind: kind needs a container engine, and envtest has no controller-manager, so
ownerReference garbage collection and Deployment → ReplicaSet rollouts (which the operator relies
on) would go untested. This starts the real binaries on loopback with generated certificates,
ServiceAccount signing keys (TokenRequest and TokenReview work) and RBAC authorization.

Used by tests, benchmarks and the demo; the operator itself never imports it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import yaml

from secretferry.devcluster import binaries, certs, images
from secretferry.devcluster import node as node_mod
from secretferry.devcluster.net import free_port as free_port  # re-exported for tests

_ISSUER = "https://kubernetes.default.svc.cluster.local"
_READY_TIMEOUT_SECONDS = 90.0  # a cold apiserver on 2 loaded cores has been seen to take ~20 s
_STOP_GRACE_SECONDS = 10.0
# The controllers the operator's behaviour depends on (GC for ownerReferences, rollouts for
# restarts, namespaces for test isolation, service accounts for TokenRequest targets).
_CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "root-ca-certificate-publisher-controller",
)
REVIEWER_NAMESPACE = "kube-system"
REVIEWER_NAME = "secretferry-token-reviewer"


@dataclass
class ControlPlane:
    """A running control plane; ``stop()`` ends exactly the processes it started."""

    workdir: Path
    bin_dir: Path
    server: str
    pki: certs.Pki
    kubeconfig: Path
    pids: dict[str, int] = field(default_factory=dict)
    owns_workdir: bool = False
    node: node_mod.Node | None = None
    apiserver_argv: list[str] = field(default_factory=list)
    """kube-apiserver's command line as last started (``restart_apiserver`` changes its keys)."""

    @property
    def ca_pem(self) -> str:
        return self.pki.ca_cert.read_text()

    def kubectl_run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; the caller reads the exit code and both streams."""
        return subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run kubectl against this cluster and return its stdout."""
        proc = self.kubectl_run(*args, input=input)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def apply(self, manifest: dict[str, object] | str) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        self.kubectl("apply", "-f", "-", input=text)

    def token_for(
        self,
        namespace: str,
        service_account: str,
        *,
        audiences: Sequence[str] = (),
        expiration_seconds: int = 600,
    ) -> str:
        """A ServiceAccount token minted by the TokenRequest API (what the operator does at login)."""
        args = ["create", "token", service_account, "-n", namespace, f"--duration={expiration_seconds}s"]
        args += [f"--audience={a}" for a in audiences]
        return self.kubectl(*args).strip()

    def reviewer_token(self, *, expiration_seconds: int = 3600) -> str:
        """A token allowed to create TokenReviews (system:auth-delegator), for a service's Kubernetes auth."""
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": REVIEWER_NAME, "namespace": REVIEWER_NAMESPACE},
            }
        )
        self.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": REVIEWER_NAME},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:auth-delegator",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": REVIEWER_NAME, "namespace": REVIEWER_NAMESPACE}
                ],
            }
        )
        return self.token_for(REVIEWER_NAMESPACE, REVIEWER_NAME, expiration_seconds=expiration_seconds)

    def token_kubeconfig(self, token: str, path: Path, *, namespace: str = "") -> Path:
        """A kubeconfig that authenticates with a bearer token only (a ServiceAccount's, as a pod
        or a tenant would), never with the admin certificate."""
        context: dict[str, str] = {"cluster": "local", "user": "token"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(self.ca_pem.encode()).decode(),
                    },
                }
            ],
            "users": [{"name": "token", "user": {"token": token}}],
            "contexts": [{"name": "local", "context": context}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def helm(self, *args: str, home: Path) -> str:
        """Run helm against this cluster with its cache/config/data under ``home`` (never the
        user's own), returning stdout; raises with helm's stderr on failure."""
        env = dict(os.environ)
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[var] = str(home / var.lower())
        env.pop("KUBECONFIG", None)
        proc = subprocess.run(
            [str(self.bin_dir / "helm"), *args, "--kubeconfig", str(self.kubeconfig)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
        return proc.stdout

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def get(self, path: str, *, timeout: float = 5.0) -> bytes:
        """GET an apiserver path as admin (no kubectl round trip)."""
        with urllib.request.urlopen(self.server + path, context=self.ssl_context(), timeout=timeout) as r:
            body: bytes = r.read()
            return body

    def restart_apiserver(self, *, verification_keys: Sequence[Path], signing_key: Path) -> None:
        """Restart kube-apiserver (same port, same etcd) with another ServiceAccount key set: it
        signs new tokens with ``signing_key`` and accepts, and publishes in its JWKS, the public
        keys ``verification_keys`` (each a ``--service-account-key-file``). How a signing key is
        rotated: add the new public key and sign with the new key, then, once every token signed
        by the old key has expired, drop the old public key. Clients and controllers reconnect
        on their own; objects in etcd stay."""
        pid = self.pids.get("kube-apiserver")
        if pid is None or not self.apiserver_argv:
            raise RuntimeError("this control plane's kube-apiserver was not started here")
        keyless = [
            arg
            for arg in self.apiserver_argv
            if not arg.startswith(("--service-account-key-file=", "--service-account-signing-key-file="))
        ]
        argv = [
            *keyless[:1],
            *(f"--service-account-key-file={key}" for key in verification_keys),
            f"--service-account-signing-key-file={signing_key}",
            *keyless[1:],
        ]
        _terminate(pid, "kube-apiserver")
        proc = _spawn("kube-apiserver", argv, self.workdir / "logs")
        self.pids["kube-apiserver"] = proc.pid  # same key: stop() still ends it before etcd
        self.apiserver_argv = argv
        self.save_state()
        _wait_ready(self, {"kube-apiserver": proc})

    def rss_bytes(self) -> int:
        """Resident memory of the processes this control plane started."""
        total = 0
        for pid in self.pids.values():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        return total

    def stop(self) -> None:
        """Stop our processes (newest first) and remove the work directory if we made it."""
        if self.node is not None:
            self.node.stop()
            self.node = None
        for name, pid in reversed(list(self.pids.items())):
            _terminate(pid, name)
        self.pids.clear()
        state = self.workdir / "state.json"
        with contextlib.suppress(FileNotFoundError):
            state.unlink()
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def save_state(self, node_state: node_mod.NodeState | None = None) -> None:
        """Record every pid (the node's too) so ``make cluster-down`` can stop what a crash left."""
        state: dict[str, object] = {"pids": self.pids, "server": self.server, "bin_dir": str(self.bin_dir)}
        node_state = node_state or (self.node.state if self.node else None)
        if node_state is not None:
            state["node"] = node_mod.state_dict(node_state)
        (self.workdir / "state.json").write_text(json.dumps(state))

    def start_node(self, *, extra_images: tuple[str, ...] = (images.OPERATOR,)) -> node_mod.Node:
        """Join a kubelet node (with pause, busybox and ``extra_images`` imported) to this cluster."""
        bin_dir = binaries.ensure(node=True)
        archives = images.ensure(images.PAUSE, images.BUSYBOX, *extra_images)
        logdir = self.workdir / "logs"
        self.node = node_mod.start(
            workdir=self.workdir / "node",
            bin_dir=bin_dir,
            pki=self.pki,
            server=self.server,
            admin_kubeconfig=self.kubeconfig,
            kubectl=self.kubectl,
            images=list(archives.values()),
            spawn=lambda name, argv: _spawn(name, argv, logdir),
            on_state=self.save_state,
        )
        self.save_state()
        return self.node


def _terminate(pid: int, name: str) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (cluster-down from another process)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            waited = 0
        if waited == pid:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _spawn(name: str, argv: Sequence[str], logdir: Path) -> subprocess.Popen[bytes]:
    log = (logdir / f"{name}.log").open("ab")
    # A session of its own, so teardown can signal the whole group and never anything else.
    return subprocess.Popen(
        list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )


def _kubeconfig(path: Path, *, server: str, pki: certs.Pki) -> None:
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "secretferry-dev",
                "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(pki.admin_cert),
                    "client-key-data": b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": "secretferry-dev", "context": {"cluster": "secretferry-dev", "user": "admin"}}],
        "current-context": "secretferry-dev",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


ISSUER: Final = _ISSUER
"""The ``iss`` of every ServiceAccount token this cluster mints (and its discovery's issuer)."""


def _allow_anonymous_discovery(cp: ControlPlane) -> None:
    """Serve ``/.well-known/openid-configuration`` and ``/openid/v1/jwks`` to anyone, as managed
    clusters (EKS, GKE, AKS) do: a service verifying tokens by OIDC discovery holds no credential
    for the cluster. Both documents carry public keys only."""
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "service-account-issuer-discovery-anonymous"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:service-account-issuer-discovery",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:unauthenticated"}
            ],
        }
    )


def _wait_ready(cp: ControlPlane, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                log = (cp.workdir / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {proc.returncode} during start-up:\n{log}")
        try:
            if cp.get("/readyz", timeout=2.0) == b"ok":
                return
        except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
            last_error = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"kube-apiserver not ready after {_READY_TIMEOUT_SECONDS:.0f} s: {last_error}")


def _wait_default_service_account(cp: ControlPlane, namespace: str = "default") -> None:
    """The serviceaccount controller is up once it has created `default` in `default`."""
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            cp.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except urllib.error.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("kube-controller-manager did not create the default ServiceAccount in time")


Profile = Literal["tuned", "production"]
"""A named set of control-plane settings; benchmarks print the one they ran with next to each figure."""


@dataclass(frozen=True)
class ProfileFlags:
    """The flags a profile adds to the ones every control plane gets (the ones that differ from the
    binaries' defaults and change how fast or how durably the API answers)."""

    etcd: tuple[str, ...]
    kube_apiserver: tuple[str, ...]


TUNED = ProfileFlags(
    etcd=(
        # etcd fsyncs its WAL on every commit; the data here is thrown away after each test or
        # benchmark, so that disk round trip (milliseconds on a shared disk) only costs test time.
        "--unsafe-no-fsync",
    ),
    kube_apiserver=(
        # APF queues requests per priority level and answers 429 past its seats; tests and the
        # benchmarks' own bulk writes (48 in parallel) should not be shaped by it.
        "--enable-priority-and-fairness=false",
        # With APF off these are the plain in-flight caps (defaults 400 / 200): raised so that the
        # benchmark's creates and the operator's start-up storm never see a 429 from the cap.
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
    ),
)
"""The default, for tests and the README's figures: throwaway data, no request shaping. Not what a
production cluster runs; ``PRODUCTION`` is, for a benchmark that must not depend on these."""

PRODUCTION = ProfileFlags(etcd=(), kube_apiserver=())
"""The binaries' defaults, as a managed cluster has them: etcd fsyncs every commit, APF is on, and
the in-flight limits are 400 / 200 (which APF sums into its 600 seats)."""

PROFILES: dict[Profile, ProfileFlags] = {"tuned": TUNED, "production": PRODUCTION}


def start(
    workdir: Path | None = None, *, bin_dir: Path | None = None, profile: Profile = "tuned"
) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-controller-manager; return once the API is ready.

    ``profile`` picks the settings that trade durability and request shaping for speed (``TUNED``,
    the default every test runs with) or keeps the binaries' defaults (``PRODUCTION``)."""
    flags = PROFILES[profile]
    bin_dir = bin_dir or binaries.ensure()
    owns = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="secretferry-cp-")) if workdir is None else workdir
    workdir.mkdir(parents=True, exist_ok=True)
    logdir = workdir / "logs"
    logdir.mkdir(exist_ok=True)
    pki = certs.generate(workdir / "pki")
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    cp = ControlPlane(
        workdir=workdir,
        bin_dir=bin_dir,
        server=server,
        pki=pki,
        kubeconfig=workdir / "kubeconfig",
        owns_workdir=owns,
    )
    _kubeconfig(cp.kubeconfig, server=server, pki=pki)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        procs["etcd"] = _spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--name=dev",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=dev=http://127.0.0.1:{etcd_peer}",
                *flags.etcd,
                "--log-level=warn",
            ],
            logdir,
        )
        cp.pids["etcd"] = procs["etcd"].pid
        cp.apiserver_argv = [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-issuer={_ISSUER}",
            # The discovery document names the JWKS where a service outside the cluster can
            # fetch it (the issuer's in-cluster name does not resolve here): OIDC auth.
            f"--service-account-jwks-uri=https://127.0.0.1:{api_port}/openid/v1/jwks",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--api-audiences={_ISSUER}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            *flags.kube_apiserver,
            "--v=1",
        ]
        procs["kube-apiserver"] = _spawn("kube-apiserver", cp.apiserver_argv, logdir)
        cp.pids["kube-apiserver"] = procs["kube-apiserver"].pid
        cp.save_state()
        _wait_ready(cp, procs)
        procs["kube-controller-manager"] = _spawn(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={cp.kubeconfig}",
                f"--authentication-kubeconfig={cp.kubeconfig}",
                f"--authorization-kubeconfig={cp.kubeconfig}",
                f"--controllers={','.join(_CONTROLLERS)}",
                f"--root-ca-file={pki.ca_cert}",
                f"--service-account-private-key-file={pki.sa_key}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
            logdir,
        )
        cp.pids["kube-controller-manager"] = procs["kube-controller-manager"].pid
        cp.save_state()
        _allow_anonymous_discovery(cp)
        _wait_default_service_account(cp)
    except BaseException:
        cp.stop()
        raise
    return cp


def stop_from_state(workdir: Path) -> bool:
    """Stop a control plane started by another process (``make cluster-down``)."""
    state = workdir / "state.json"
    if not state.exists():
        return False
    data = json.loads(state.read_text())
    if "node" in data:
        node_mod.stop(node_mod.state_from_dict(data["node"]))
    for name, pid in reversed(list(data["pids"].items())):
        _terminate(int(pid), name)
    state.unlink()
    return True


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[ControlPlane]:
    cp = start(workdir)
    try:
        yield cp
    finally:
        cp.stop()
