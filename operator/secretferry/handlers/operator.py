"""kopf handlers: start-up and clean-up of the controller, and MachineIdentity intake.

Why so little here: at 10,000 SecretSyncs kopf's per-object change handlers, timers and
indexes cost minutes (design.md, "Scale decisions"), so SecretSyncs come in through the
controller's own LIST+WATCH. kopf still runs the process: login, liveness, peering for HA, and
the identities, which are few. ``on.event`` handlers need no finalizers and write nothing back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Mapping
from typing import Any

import kopf

from secretferry import settings as settings_mod
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import hmackey, incluster, leases
from secretferry.models import base as models_base
from secretferry.reconcile import controller as controller_mod
from secretferry.reconcile import identities as ident_mod

log = logging.getLogger(__name__)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    cfg: settings_mod.Settings = memo.settings
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
    controller = controller_mod.Controller(kube=kube, settings=cfg, hmac_key=key, instance=instance)
    memo.kube, memo.controller = kube, controller
    if cfg.peering:
        memo.elector = asyncio.create_task(_lead(kube, cfg, controller, instance), name="leader election")
        log.info("secretferry waiting for leadership (Lease %s/%s)", cfg.namespace, cfg.peering)
    else:
        await controller.start()
        log.info("secretferry started (namespaces: %s)", ", ".join(cfg.watched_namespaces()) or "all")


def instance_name(cfg: settings_mod.Settings, env: Mapping[str, str]) -> str:
    """This replica's Lease holder identity: the pod name the chart passes in, else the host name.
    Under hostNetwork HOSTNAME is the node's, shared by every replica on it."""
    return cfg.pod_name or env.get("HOSTNAME") or socket.gethostname()


# A leader renews every 5 s and holds the Lease for 15 s: a crashed leader is replaced within
# ~15-20 s, and a slow apiserver round trip does not cost leadership.
_LEASE_SECONDS = 15
_RENEW_SECONDS = 5.0


async def _lead(
    kube: kube_client.Kube, cfg: settings_mod.Settings, controller: controller_mod.Controller, instance: str
) -> None:
    """Run the controller only while holding the Lease; exit when leadership is lost, so that a
    fresh process (restarted by the kubelet) waits its turn with clean state."""
    leading, renewed_at = False, 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            held = await leases.acquire_or_renew(
                kube,
                namespace=cfg.namespace,
                name=cfg.peering,
                identity=instance,
                lease_seconds=_LEASE_SECONDS,
            )
        except kube_errors.KubeError as exc:
            log.warning("leader election: %s", exc)
            held = leading and loop.time() - renewed_at < _LEASE_SECONDS * 0.8
        if held:
            renewed_at = loop.time()
            if not leading:
                leading = True
                log.info("became the leader (%s); starting the controller", instance)
                await controller.start()
        elif leading:
            log.error("lost leadership of Lease %s/%s; exiting", cfg.namespace, cfg.peering)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        await asyncio.sleep(_RENEW_SECONDS)


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
    elector: asyncio.Task[None] | None = getattr(memo, "elector", None)
    if elector is not None:
        elector.cancel()
    controller: controller_mod.Controller | None = getattr(memo, "controller", None)
    if controller is not None:
        await controller.stop()
    kube: kube_client.Kube | None = getattr(memo, "kube", None)
    if kube is not None:
        await kube.close()


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
