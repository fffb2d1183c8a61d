"""kopf handlers: start-up and clean-up of the controller, and MachineIdentity intake.

Why so little here: at 10,000 SecretSyncs kopf's per-object change handlers, timers and
indexes cost minutes (docs/architecture.md, "Scale decisions"), so SecretSyncs come in through the
controller's own LIST+WATCH. kopf still runs the process: login, liveness, peering for HA, and
the identities, which are few. ``on.event`` handlers need no finalizers and write nothing back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from secretferry import readiness as readiness_mod
from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import hmackey, incluster, leases
from secretferry.models import base as models_base
from secretferry.models import labels
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import webhook_relay
from secretferry.reconcile.leases import keeper as lease_keeper

log = logging.getLogger(__name__)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    cfg: settings_mod.Settings = memo.settings
    readiness = _readiness(memo)
    if cfg.readiness_port and getattr(memo, "readiness_server", None) is None:
        # first of all: the kubelet then reads "starting" (503), not a refused connection
        try:
            memo.readiness_server = await readiness_mod.serve(
                readiness, host=cfg.listen_address, port=cfg.readiness_port
            )
        except OSError as exc:  # taken, or no such address: say so and stop, not retry forever
            raise kopf.PermanentError(
                f"the readiness endpoint cannot listen on {cfg.listen_address} port {cfg.readiness_port}:"
                f" {exc.strerror or exc}"
            ) from exc
    settings.posting.enabled = False  # our own Events, only on transitions
    settings.persistence.finalizer = "secretferry.io/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="secretferry.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="secretferry.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300  # seconds; the apiserver ends watches itself, kopf re-opens
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.peering.clusterwide = not cfg.watched_namespaces()
    kube = await kube_client.connect(kubeconfig=cfg.kubeconfig)
    key = await hmackey.get_or_create(kube, namespace=cfg.namespace, name=cfg.hmac_key_secret)
    instance = instance_name(cfg, os.environ)
    elector = None
    if cfg.peering:
        elector = leases.Elector(
            kube,
            namespace=cfg.namespace,
            name=cfg.peering,
            identity=instance,
            timings=leader_timings(cfg),
            annotations=advertised(cfg),
        )
    controller = controller_mod.Controller(
        kube=kube,
        settings=cfg,
        hmac_key=key,
        instance=instance,
        webhook_leader=(lambda: None) if elector is None else webhook_leader(elector),
    )
    memo.kube, memo.controller = kube, controller
    controller.open_receiver()
    memo.leases = lease_keeper.LeaseKeeper(
        kube=kube,
        identities=controller.identities,
        rollouts_=controller.rollouts,
        settings=cfg,
        instance=instance,
    )
    if elector is not None:
        memo.elector = elector
        memo.election = asyncio.create_task(
            lead(elector, start=controller.start, stop=lambda: _stop_controller(memo)), name="leader election"
        )
        log.info("secretferry waiting for leadership (Lease %s/%s)", cfg.namespace, cfg.peering)
        readiness.leader_election, readiness.leading = True, lambda: elector.leading
    else:
        await controller.start()
        log.info(
            "secretferry started (namespaces: %s; namespace selector: %s)",
            ", ".join(cfg.watched_namespaces()) or "all",
            cfg.watch_namespace_selector or "none",
        )
    readiness.caches_complete = controller.serving
    readiness.started = True


def _readiness(memo: kopf.Memo) -> readiness_mod.Readiness:
    """The probe's state (runtime.main puts it into the memo; a test's memo may lack it)."""
    found: readiness_mod.Readiness | None = getattr(memo, "readiness", None)
    if found is None:
        found = memo.readiness = readiness_mod.Readiness()
    return found


def instance_name(cfg: settings_mod.Settings, env: Mapping[str, str]) -> str:
    """This replica's Lease holder identity: the pod name the chart passes in, else the host name.
    Under hostNetwork HOSTNAME is the node's, shared by every replica on it."""
    return cfg.pod_name or env.get("HOSTNAME") or socket.gethostname()


def advertised(cfg: settings_mod.Settings) -> dict[str, str]:
    """What this replica writes on the Lease while it leads: its webhook receiver's address, for
    standbys to relay to (reconcile/webhook_relay.py). Written even when empty (no receiver, or no
    pod IP), so a holder never inherits the previous holder's address."""
    if not cfg.webhook_port:
        return {}
    address = webhook_relay.advertised(cfg.pod_ip, cfg.webhook_port)
    return {labels.WEBHOOK_ADDRESS_ANNOTATION: address or ""}


def webhook_leader(elector: leases.Elector) -> Callable[[], webhook_relay.Address | None]:
    return lambda: webhook_relay.parse(elector.holder_annotation(labels.WEBHOOK_ADDRESS_ANNOTATION))


def leader_timings(cfg: settings_mod.Settings) -> leases.Timings:
    return leases.Timings(
        lease_duration_seconds=cfg.leader_lease_duration_seconds,
        renew_deadline_seconds=cfg.leader_renew_deadline_seconds,
        retry_period_seconds=cfg.leader_retry_period_seconds,
    )


def _terminate() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


async def lead(
    elector: leases.Elector,
    *,
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    exit_process: Callable[[], None] = _terminate,
) -> None:
    """Run the controller only while holding the Lease.

    On losing it, the controller stops first, before a standby may take over (the elector gives up
    at the renew deadline, below the lease duration), so two replicas never write at once. Then
    the process exits, so that a fresh one (restarted by the kubelet) waits its turn with clean
    state rather than a half-stopped controller.
    """

    async def step_down() -> None:
        log.error("lost leadership; stopping the controller and exiting")
        await stop()
        exit_process()

    try:
        await elector.run(on_started_leading=start, on_stopped_leading=step_down)
    except Exception:  # a bug while waiting to lead: a restarted process is a fresh candidate
        log.exception("leader election failed; exiting")
        exit_process()


async def _stop_controller(memo: kopf.Memo) -> None:
    """Stop the controller once, whoever asks first (a step-down, then the shutdown it causes);
    a later caller waits for the same stop. Shielded: cancelling a caller does not leave the
    controller half stopped."""
    stopping: asyncio.Task[None] | None = getattr(memo, "stopping", None)
    if stopping is None:
        controller: controller_mod.Controller | None = getattr(memo, "controller", None)
        if controller is None:
            return
        stopping = memo.stopping = asyncio.create_task(controller.stop(), name="controller stop")
    await asyncio.shield(stopping)


@kopf.on.login()
def login(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """The same choice as ``kube_client.connect()``: an explicit kubeconfig, in-cluster, $KUBECONFIG.

    Not kopf's ``login_with_service_account``: it dials ``kubernetes.default.svc``, which does not
    resolve everywhere. Not kopf's default login either: it imports the sync ``kubernetes``
    client just to read a kubeconfig (about 40 MiB of the operator's memory).
    """
    cfg: settings_mod.Settings = memo.settings
    if not cfg.kubeconfig:  # runtime exports it as $KUBECONFIG for the fallback below
        info = _in_cluster_login(memo, trust_env=settings.networking.trust_env)
        if info is not None:
            return info
    return kopf.login_with_kubeconfig(settings=settings, **kwargs)


def _in_cluster_login(memo: kopf.Memo, *, trust_env: bool) -> kopf.ConnectionInfo | None:
    """kopf's vault drops credentials once ``expiration`` passes (checked at its next API call)
    and calls this again, so the token file is re-read about as often as client-go does. The
    ``TokenFile`` lives in ``memo``: an unchanged token must come back equal (see its
    ``reread``)."""
    state: tuple[incluster.InClusterConfig, incluster.TokenFile] | None = getattr(memo, "in_cluster", None)
    if state is None:
        try:
            config = incluster.load(os.environ, incluster.SERVICE_ACCOUNT_DIR)
        except kube_errors.NotConfigured as exc:
            raise kopf.PermanentError(exc.message) from exc
        if config is None:
            return None
        state = memo.in_cluster = (config, incluster.TokenFile(config.token_path))
    config, token_file = state
    token = token_file.reread()
    return kopf.ConnectionInfo(
        server=config.server,
        ca_path=str(config.ca_path),
        scheme="Bearer",
        token=token.value,
        default_namespace=config.namespace,
        expiration=token.reread_at,
        trust_env=trust_env,
    )


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    _readiness(memo).stopping = True  # NotReady at once: nothing counts on a replica that is going
    controller: controller_mod.Controller | None = getattr(memo, "controller", None)
    if controller is not None:
        await controller.close_receiver()
    election: asyncio.Task[None] | None = getattr(memo, "election", None)
    if election is not None:
        election.cancel()
        await asyncio.wait([election])  # ended, however it ended: no renewal races the release
    await _stop_controller(memo)
    elector: leases.Elector | None = getattr(memo, "elector", None)
    cfg: settings_mod.Settings = memo.settings
    if elector is not None and cfg.leader_release_on_shutdown:
        # after the controller stopped, so no write of ours follows: a standby takes over at once
        # instead of waiting out the lease duration (a rollout's new pod, or the other replica)
        await elector.release()
    kube: kube_client.Kube | None = getattr(memo, "kube", None)
    if kube is not None:
        await kube.close()
    server: asyncio.Server | None = getattr(memo, "readiness_server", None)
    if server is not None:
        server.close()
        await server.wait_closed()


# Handlers are coroutines: kopf runs plain functions in a thread pool, where the controller's
# asyncio objects must not be touched.
@kopf.on.event(models_base.GROUP, models_base.VERSION, "machineidentities")
async def machine_identity(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _identity(ident_mod.MACHINE, event, memo)


@kopf.on.event(models_base.GROUP, models_base.VERSION, "clustermachineidentities")
async def cluster_machine_identity(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _identity(ident_mod.CLUSTER, event, memo)


def _identity(kind: str, event: kopf.RawEvent, memo: kopf.Memo) -> None:
    controller: controller_mod.Controller | None = getattr(memo, "controller", None)
    if controller is None:
        raise kopf.TemporaryError("the controller is still starting", delay=1)
    controller.identity_event(kind, event.get("type"), event["object"])


@kopf.on.event(models_base.GROUP, models_base.VERSION, "temporaryprivileges")
async def temporary_privilege(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Few objects, so kopf's watch; no kopf finalizer or timers: the controller's privilege manager
    keeps its own (reconcile/privileges/manager.py), and acts only while this replica leads."""
    controller: controller_mod.Controller | None = getattr(memo, "controller", None)
    if controller is None:
        raise kopf.TemporaryError("the controller is still starting", delay=1)
    controller.privilege_event(event.get("type"), event["object"])
