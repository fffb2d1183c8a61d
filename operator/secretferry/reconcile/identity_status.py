"""An identity's status: whether its login works, when it last logged in, which list route its host has.

Written by the login check this module runs when an identity appears or changes, and after each
use of the identity by a reconcile pass (``Deps.on_identity``). Patched only when what it reports
changes: thousands of SecretSyncs share a handful of identities, and each pass reports on one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import status as kube_status
from secretferry.models import base as models_base
from secretferry.reconcile import conditions, outcomes, reasons, tasks
from secretferry.reconcile import identities as ident_mod
from secretferry.service import errors as service_errors
from secretferry.service import listroutes

log = logging.getLogger(__name__)
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class IdentityStatus:
    def __init__(
        self,
        *,
        kube: kube_client.Kube,
        identities: ident_mod.IdentityRegistry,
        routes: listroutes.ListRoutes,
        background: tasks.Tasks,
    ) -> None:
        self._kube = kube
        self._identities = identities
        self._routes = routes
        self._background = background

    def spawn_check(self, entry: ident_mod.IdentityEntry) -> asyncio.Task[None]:
        return self._background.spawn_side(self.check(entry))

    async def check(self, entry: ident_mod.IdentityEntry) -> None:
        """Log in once when an identity appears or changes, so its status says whether it works."""
        if entry.model is None:
            await self.report(entry, (reasons.INVALID_SPEC, entry.invalid or "invalid spec"))
            return
        try:
            session = await self._identities.session(entry)
            await session.token()
        except ident_mod.IdentityProblem as exc:
            await self.report(entry, (exc.reason, exc.message))
        except service_errors.ServiceError as exc:
            failure = outcomes.from_service_error(exc, scope_text="login")
            await self.report(entry, (failure.reason, failure.message))
        else:
            await self.report(entry, None)

    async def report(self, entry: ident_mod.IdentityEntry, problem: tuple[str, str] | None) -> None:
        """Patch the identity's status when it differs from what was last reported.

        ``problem`` is None when the login worked, else (reason, message).
        """
        session = entry.session
        last_login = session.last_login_at if session is not None else None
        login_text = last_login.strftime(_TIME_FORMAT) if last_login else ""
        # Which list route the identity's host has, once a list there showed it (listroutes).
        list_path = self._routes.known(session.api_root) if session is not None else None
        notes = (*entry.notes, listroutes.V3_NOTE) if list_path == listroutes.V3 else entry.notes
        if problem is None:
            reported = ("True", reasons.LOGGED_IN, login_text, list_path or "")
        else:
            reported = ("False", problem[0], login_text, list_path or "")
        if entry.reported == reported:
            return
        entry.reported = reported
        kind, namespace, name = entry.key
        status: dict[str, Any] = {
            "conditions": conditions.set_condition(
                [],
                type_=reasons.READY,
                status=reported[0],
                reason=reported[1],
                message="; ".join(("login works", *notes)) if problem is None else problem[1],
                observed_generation=entry.generation,
                now=conditions.now_iso(),
            ),
            "observedGeneration": entry.generation,
        }
        if last_login is not None:
            status["lastLoginTime"] = login_text
        if list_path is not None:
            status["listEndpoint"] = list_path
        expires = session.expires_at if session is not None else None
        if expires is not None:
            status["tokenExpiresAt"] = expires.strftime(_TIME_FORMAT)
        try:
            await kube_status.patch_status(
                self._kube,
                group=models_base.GROUP,
                version=models_base.VERSION,
                plural=ident_mod.PLURALS[kind],
                namespace=namespace or None,
                name=name,
                status=status,
            )
        except kube_errors.KubeError as exc:
            entry.reported = None
            log.warning("status of %s not written: %s", ident_mod.key_str(entry.key), exc)
