"""An identity's status: whether its login works, when it last logged in, which routes its host has
(the list route, and the slug route when it is not the documented one).

Written by the login check this module runs when an identity appears or changes, and after each
use of the identity by a reconcile pass (``Deps.on_identity``). Patched only when what it reports
changes: thousands of SecretSyncs share a handful of identities, and each pass reports on one.

A change of readiness is logged once, when the patch that says it is written: a WARNING when the
identity goes not Ready (or fails for another reason), an INFO when it is Ready again; nothing
in a namespace being deleted (kube/events.py), where its credentials vanish along with it.
"""

from __future__ import annotations

import asyncio
import logging

from secretferry import logfields
from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import events as kube_events
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.models import identity as identity_models
from secretferry.reconcile import conditions, outcomes, problems, reasons, tasks
from secretferry.reconcile import identities as ident_mod
from secretferry.service import errors as service_errors
from secretferry.service import listroutes, slugroutes

log = logging.getLogger(__name__)


class IdentityStatus:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        identities: ident_mod.IdentityRegistry,
        routes: listroutes.ListRoutes,
        slug_routes: slugroutes.SlugRoutes | None = None,
        background: tasks.Tasks,
    ) -> None:
        self._kube = kube
        self._identities = identities
        self._routes = routes
        self._slug_routes = slug_routes
        self._background = background

    def spawn_check(self, entry: ident_mod.IdentityEntry) -> asyncio.Task[None]:
        return self._background.spawn_side(self.check(entry))

    async def check(self, entry: ident_mod.IdentityEntry) -> None:
        """Log in once when an identity appears or changes, so its status says whether it works."""
        if entry.model is None:
            await self.report(entry, problems.Problem(reasons.INVALID_SPEC, entry.invalid or "invalid spec"))
            return
        try:
            session = await self._identities.session(entry)
            await session.token()
        except problems.Problem as exc:
            await self.report(entry, exc)
        except service_errors.ServiceError as exc:
            await self.report(entry, outcomes.from_service_error(exc, scope_text="login"))
        else:
            await self.report(entry, None)

    async def report(self, entry: ident_mod.IdentityEntry, problem: problems.Problem | None) -> None:
        """Patch the identity's status when it differs from what was last reported.

        ``problem`` is None when the login worked, else why not.
        """
        if entry.withdrawn and (problem is None or problem.reason != reasons.CREDENTIALS_NOT_OPTED_IN):
            # A pass that started before the opt-in was taken back may end after it: while it is
            # withdrawn, that is what the status says.
            problem = next(iter(entry.withdrawn.values()))
        session = entry.session
        last_login = session.last_login_at if session is not None else None
        login_text = last_login.strftime(models_base.TIME_FORMAT) if last_login else ""
        # Which list route the identity's host has, once a list there showed it (listroutes).
        list_path = self._routes.known(session.api_root) if session is not None else None
        notes = (*entry.notes, listroutes.V3_NOTE) if list_path == listroutes.V3 else entry.notes
        # And the slug route, once a look-up there showed it is not the documented one (slugroutes).
        slug_path = self._slug_routes.known(session.api_root) if self._slug_routes and session else None
        if slug_path == slugroutes.V2:
            notes = (*notes, slugroutes.V2_NOTE)
        routes = (list_path or "", slug_path or "")
        if problem is None:
            reported = ("True", reasons.LOGGED_IN, login_text, *routes)
        else:
            reported = ("False", problem.reason, login_text, *routes)
        previous = entry.reported
        if previous == reported:
            return
        kind, namespace, name = entry.key
        status = identity_models.MachineIdentityStatus(
            conditions=conditions.set_condition(
                [],
                type_=reasons.READY,
                status="True" if problem is None else "False",
                reason=reported[1],
                message="; ".join(("login works", *notes)) if problem is None else problem.message,
                observed_generation=entry.generation,
                now=conditions.now(),
            ),
            observed_generation=entry.generation,
            last_login_time=last_login,
            list_endpoint=list_path,
            token_expires_at=session.expires_at if session is not None else None,
        )
        entry.reported = reported
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=ident_mod.PLURALS[kind],
                namespace=namespace or None,
                name=name,
                # None fields are left out: what this report does not know stays as it is.
                status=status.model_dump(mode="json", by_alias=True, exclude_none=True),
            )
        except kube_errors.KubeError as exc:
            entry.reported = None
            log.warning(
                "status of %s not written: %s",
                ident_mod.key_str(entry.key),
                exc,
                extra=_fields(entry, reported[1]),
            )
            return
        if previous is None or previous[:2] != reported[:2]:
            _log_transition(entry, previous, reported, problem)


def _fields(entry: ident_mod.IdentityEntry, reason: str) -> dict[str, str]:
    kind, namespace, name = entry.key
    return logfields.about(kind, namespace, name, identity=ident_mod.key_str(entry.key), reason=reason)


def _log_transition(
    entry: ident_mod.IdentityEntry,
    previous: tuple[str, ...] | None,
    reported: tuple[str, ...],
    problem: problems.Problem | None,
) -> None:
    """One line per change of readiness or reason. A first report that the login works (every
    identity, at every start) is no news; a first failure is."""
    if kube_events.terminating(entry.key[1]):
        return
    fields = _fields(entry, reported[1])
    if problem is not None:
        log.warning(
            "%s is not Ready (%s): %s",
            ident_mod.key_str(entry.key),
            problem.reason,
            problem.message[: problems.NOTE_MAX_CHARS],
            extra=fields,
        )
    elif previous is not None and previous[0] != "True":
        log.info("%s is Ready again: login works", ident_mod.key_str(entry.key), extra=fields)
