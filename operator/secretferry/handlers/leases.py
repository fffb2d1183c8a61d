"""kopf handlers of DynamicSecretLease: one keeper loop per object (a daemon) and revocation on
deletion (a finalizer). DynamicSecretLeases are few (each is a database role), so kopf's per-object
machinery costs nothing here, unlike SecretSyncs (handlers/operator.py).

Only the leader works: a standby's daemons wait (the controller's ``leading``), so two replicas
never lease, renew or revoke for the same object.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import pydantic

from secretferry.models import base as models_base
from secretferry.models import dynamicsecretlease as lease_models
from secretferry.reconcile import problems
from secretferry.reconcile.leases import keeper as keeper_mod

log = logging.getLogger(__name__)
_IDLE_SECONDS = 1.0  # how often a standby (or a starting process) looks whether it leads now
_INVALID_WAIT_SECONDS = (
    300.0  # a spec the apiserver let through but the model refuses: a spec edit restarts it
)
_DELETE_RETRY_SECONDS = 30
_DELETE_RETRIES = 10  # about 5 minutes of a failing revocation, then the lease is left to expire


def _keeper(memo: kopf.Memo) -> keeper_mod.LeaseKeeper | None:
    controller = getattr(memo, "controller", None)
    keeper: keeper_mod.LeaseKeeper | None = getattr(memo, "leases", None)
    if controller is None or keeper is None or not controller.leading.is_set():
        return None
    return keeper


@kopf.daemon(models_base.GROUP, models_base.VERSION, lease_models.PLURAL, cancellation_timeout=5.0)
async def dynamic_secret_lease(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    while not stopped:
        keeper = _keeper(memo)
        if keeper is None:
            await stopped.wait(_IDLE_SECONDS)
            continue
        try:
            lease = lease_models.DynamicSecretLease.from_body(body)
        except pydantic.ValidationError:
            log.warning(
                "DynamicSecretLease %s/%s has an invalid spec", body.metadata.namespace, body.metadata.name
            )
            await stopped.wait(_INVALID_WAIT_SECONDS)
            continue
        delay = await keeper.step(lease)
        await _pause(stopped, keeper.woken(lease), delay)


async def _pause(stopped: kopf.DaemonStopped, woken: asyncio.Event, delay: float) -> None:
    """Wait ``delay`` seconds, or less: until kopf stops the daemon, or a spec edit wakes it
    (``dynamic_secret_lease_event``). Before, an edit waited for the delay (up to 5 minutes)."""
    stop = asyncio.ensure_future(stopped.wait(delay))
    edit = asyncio.ensure_future(woken.wait())
    try:
        await asyncio.wait({stop, edit}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stop, edit):
            task.cancel()
        await asyncio.gather(stop, edit, return_exceptions=True)


@kopf.on.event(models_base.GROUP, models_base.VERSION, lease_models.PLURAL)
async def dynamic_secret_lease_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Every watch event (no state kept by kopf): a new generation wakes the object's loop, whose
    ``body`` kopf has updated by now."""
    keeper: keeper_mod.LeaseKeeper | None = getattr(memo, "leases", None)
    if keeper is not None and event.get("type") != "DELETED":
        keeper.noticed(event["object"])


@kopf.on.delete(models_base.GROUP, models_base.VERSION, lease_models.PLURAL, retries=_DELETE_RETRIES)
async def dynamic_secret_lease_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    keeper = _keeper(memo)
    if keeper is None:
        raise kopf.TemporaryError("not leading (or still starting)", delay=5)
    try:
        lease = lease_models.DynamicSecretLease.from_body(body)
    except pydantic.ValidationError:
        return  # never leased anything
    try:
        await keeper.release(lease)
    except problems.Problem as problem:
        raise kopf.TemporaryError(problem.message, delay=_DELETE_RETRY_SECONDS) from None
