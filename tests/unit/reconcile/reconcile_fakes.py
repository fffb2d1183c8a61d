"""Stand-ins for the controller's collaborators' ports: the Kubernetes client and the work queue.

No apiserver: ``FakeKube`` answers ``request`` from a handler and records every call (a
``FakeApiserver`` is such a handler, keeping the objects a reconcile pass reads and writes); the
queue records what was enqueued instead of running it.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

from secretferry.kube import client as kube_client
from secretferry.kube import errors as kube_errors
from secretferry.kube import objects
from secretferry.reconcile import identities as ident_mod
from secretferry.reconcile import scheduler, state

Answer = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _empty(method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {}


class FakeKube:
    def __init__(self, answer: Answer = _empty) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._answer = answer

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, path, kwargs))
        return await self._answer(method, path, kwargs)

    def bearer_token(self) -> str | None:
        """Authenticated as an admin with a client certificate: no token of its own to read."""
        return None

    def port(self) -> kube_client.Kube:
        return cast(kube_client.Kube, self)


class RecordingQueue:
    """Keeps the last ``live`` each key was queued with."""

    def __init__(self) -> None:
        self.queued: dict[state.SyncKey, bool] = {}

    def enqueue(self, key: state.SyncKey, *, live: bool = True, first: bool = False) -> None:
        self.queued[key] = live

    def forget(self, key: state.SyncKey) -> None:
        self.queued.pop(key, None)

    def port(self) -> scheduler.Scheduler[state.SyncKey]:
        return cast(scheduler.Scheduler[state.SyncKey], self)


class FakeSession:
    """A service session whose login fails with ``error`` (or works when None); never logged in."""

    last_login_at = None
    expires_at = None

    def __init__(self, error: Exception | None = None, *, api_root: str = "http://127.0.0.1:9/api") -> None:
        self.error = error
        self.api_root = api_root
        self.logins = 0

    async def token(self) -> str:
        self.logins += 1
        if self.error is not None:
            raise self.error
        return "t"


class FakeSessions:
    """The registry's ``session(entry)``: hands every identity the same fake session."""

    def __init__(self, session: FakeSession) -> None:
        self._session = session

    async def session(self, entry: ident_mod.IdentityEntry) -> FakeSession:
        entry.session = cast(Any, self._session)
        return self._session

    def port(self) -> ident_mod.IdentityRegistry:
        return cast(ident_mod.IdentityRegistry, self)


# A Secret, ConfigMap, ServiceAccount or Namespace path: what ``FakeApiserver`` answers 404 for
# when it does not hold it (any other unknown GET, say a workload listing, answers ``{}``).
_KEPT_PATH = re.compile(r"^/api/v1/namespaces/[^/]+(/(secrets|configmaps|serviceaccounts)/[^/]+)?$")
_CREATE_PATH = re.compile(r"^/api/v1/namespaces/[^/]+/(secrets|configmaps)$")


# The apiserver's own audiences (its --api-audiences), as a TokenRequest without audiences gets them.
API_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)


class FakeApiserver:
    """Just enough of an apiserver for a reconcile pass, as a ``FakeKube`` answer.

    Objects are kept by path. GET answers a stored object (404 for a core object it does not
    hold); POST to a Secret/ConfigMap collection creates (409 AlreadyExists when the name is
    taken; with ``dryRun`` it stores nothing); a server-side apply creates or merges the way a
    field manager's apply does (data keys it applied before and leaves out now are dropped, unless
    another manager applied them;
    ``resourceVersion`` moves only when something changed); a merge patch merges (``None``
    removes a key). Status patches, Events and anything else are accepted and not kept.
    ``faults[(method, path)]`` is raised once instead.
    """

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.faults: dict[tuple[str, str], kube_errors.KubeError] = {}
        self._applied: dict[tuple[str, str], set[str]] = {}
        """Data keys each (path, field manager) applied last."""
        self._versions = itertools.count(1)

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self.objects[path] = self._stamp(copy.deepcopy(obj))

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The stored Secret's data, decoded; None when there is no such Secret."""
        found = self.objects.get(objects.path("Secret", namespace, name))
        if found is None:
            return None
        return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}

    async def answer(self, method: str, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        fault = self.faults.pop((method, path), None)
        if fault is not None:
            raise fault
        body: dict[str, Any] = copy.deepcopy(kwargs.get("body") or {})
        if method == "GET":
            if path in self.objects:
                return copy.deepcopy(self.objects[path])
            if _KEPT_PATH.match(path):
                raise kube_errors.NotFound(404, "NotFound", f"{path} not found")
            return {}
        if method == "POST" and _CREATE_PATH.match(path) and (kwargs.get("query") or {}).get("dryRun"):
            return self._stamp(body)  # a dry run: validated (no fault set), stored nowhere
        if method == "POST" and _CREATE_PATH.match(path):
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                raise kube_errors.AlreadyExists(409, "AlreadyExists", f"{target} already exists")
            self.objects[target] = self._stamp(body)
            return copy.deepcopy(self.objects[target])
        if method == "PATCH" and not path.endswith("/status"):
            if kwargs.get("content_type") == objects.APPLY_PATCH:
                manager = str((kwargs.get("query") or {}).get("fieldManager", ""))
                return self._apply(path, body, manager=manager)
            return self._merge(path, body)
        if method == "DELETE":
            if self.objects.pop(path, None) is None:
                raise kube_errors.NotFound(404, "NotFound", f"{path} not found")
            return {}
        if method == "POST" and path.endswith("/token"):  # TokenRequest: audiences defaulted
            spec = {**(body.get("spec") or {})}
            spec["audiences"] = spec.get("audiences") or list(API_AUDIENCES)
            return {
                "spec": spec,
                "status": {"token": "minted", "expirationTimestamp": "2030-01-01T00:00:00Z"},
            }
        return {}

    def _apply(self, path: str, body: dict[str, Any], *, manager: str) -> dict[str, Any]:
        current = self.objects.get(path)
        applied = set(body.get("data") or {})
        if current is None:
            result = self._stamp(body)
        else:
            result = copy.deepcopy(current)
            meta, wanted = result.setdefault("metadata", {}), body.get("metadata") or {}
            for field in ("labels", "annotations"):
                if wanted.get(field):
                    meta[field] = {**(meta.get(field) or {}), **wanted[field]}
            if "ownerReferences" in wanted:
                meta["ownerReferences"] = wanted["ownerReferences"]
            if "type" in body:
                result["type"] = body["type"]
            others = [keys for (p, m), keys in self._applied.items() if p == path and m != manager]
            dropped = self._applied.get((path, manager), set()) - applied - set().union(*others)
            data = {k: v for k, v in (result.get("data") or {}).items() if k not in dropped}
            result["data"] = {**data, **(body.get("data") or {})}
            if result != current:
                self._stamp(result)
        self._applied[(path, manager)] = applied
        self.objects[path] = result
        return copy.deepcopy(result)

    def _merge(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        current = self.objects.get(path)
        if current is None:
            raise kube_errors.NotFound(404, "NotFound", f"{path} not found")
        result = _merge_patch(current, body)
        if result != current:
            self._stamp(result)
        self.objects[path] = result
        return copy.deepcopy(result)

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta.get('name', '')}")
        meta["resourceVersion"] = str(next(self._versions))
        return obj


def _merge_patch(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    result = copy.deepcopy(current)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge_patch(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
