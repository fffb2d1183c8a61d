"""From the input's objects to the result: which converter sees which object, in which order.

Connections before the auths that name them, auths before the static secrets that use them; then
every identity is finished (its kind depends on all its SecretSyncs), then every SecretSync (its
identityRef depends on that). Objects that are not the Infisical operator's are skipped unread,
Secrets included, except workloads Infisical reloads, which get a step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from secretferry.convert import identities, infisical, results, syncs, values
from secretferry.models import errors

# kube.workloads.AUTO_RELOAD_ANNOTATION, spelt out so that `convert` does not load the Kubernetes
# client (tests check the two agree).
AUTO_RELOAD_ANNOTATION: Final = "secretferry.io/auto-reload"
INFISICAL_AUTO_RELOAD: Final = f"{infisical.GROUP}/auto-reload"
_WORKLOADS: Final = ("Deployment", "StatefulSet", "DaemonSet", "Rollout")  # what auto-reload restarts
_ELSEWHERE: Final = ("InfisicalPushSecret", "InfisicalDynamicSecret", "InfisicalStaticSecretPush")


_O = TypeVar("_O", bound=infisical.Object)


class _Conversion:
    def __init__(self) -> None:
        self.ledger = results.Ledger()
        self.logins: dict[str, identities.Identity] = {}
        self.connections: dict[str, infisical.InfisicalConnection] = {}
        self.syncs: list[syncs.Sync] = []

    def parse(self, model: type[_O], raw: Mapping[str, Any], obj: str) -> _O | None:
        """The object as Infisical's CRD reads it, every unknown field noted; None (noted) if invalid."""
        try:
            parsed = model.model_validate(raw)
        except ValidationError as exc:
            why = f"not a valid {raw.get('kind')}: {errors.describe_validation_error(exc)}"
            self.ledger.note(obj, "spec", why)
            return None
        for path in infisical.unknown_fields(parsed.spec, "spec"):
            self.ledger.note(obj, path, "unknown field; nothing here reads it")
        return parsed

    def keep(self, key: str, draft: identities.Identity) -> identities.Identity:
        """One identity per distinct login: InfisicalSecrets that log in alike share it."""
        kept = self.logins.setdefault(key, draft)
        kept.origins.append(draft.origin)
        return kept

    def connection(self, raw: Mapping[str, Any], obj: str) -> None:
        cr = self.parse(infisical.InfisicalConnection, raw, obj)
        if cr is not None:
            self.connections[obj] = cr

    def auth(self, raw: Mapping[str, Any], obj: str) -> None:
        cr = self.parse(infisical.InfisicalAuth, raw, obj)
        draft = None if cr is None else identities.from_infisical_auth(cr, obj, self.connections, self.ledger)
        if draft is not None:
            self.keep(obj, draft)

    def infisical_secret(self, raw: Mapping[str, Any], obj: str) -> None:
        cr = self.parse(infisical.InfisicalSecret, raw, obj)
        if cr is None:
            return
        login = identities.from_infisical_secret(cr, obj, self.ledger)
        if login is not None:
            login = (self.keep(login[0].fingerprint(), login[0]), login[1])
        self.syncs += syncs.from_infisical_secret(cr, obj, login, self.ledger)

    def static_secret(self, raw: Mapping[str, Any], obj: str) -> None:
        cr = self.parse(infisical.InfisicalStaticSecret, raw, obj)
        if cr is None:
            return
        ref = cr.spec.infisical_auth_ref
        auth_id = values.object_id("InfisicalAuth", ref.namespace or cr.metadata.namespace, ref.name)
        login = self.logins.get(auth_id)
        if login is None:
            self.ledger.note(
                obj, "spec.infisicalAuthRef", f"{auth_id} is not in the input, or was not converted"
            )
            return
        self.syncs += syncs.from_static_secret(cr, obj, login, self.ledger)

    def workload(self, raw: Mapping[str, Any], kind: str, obj: str) -> None:
        meta = _metadata(raw)
        if str((meta.get("annotations") or {}).get(INFISICAL_AUTO_RELOAD, "")).lower() != "true":
            self.ledger.result.skipped.append(obj)
            return
        text = results.kubectl(
            "annotate",
            kind.lower(),
            meta.get("namespace"),
            str(meta.get("name")),
            f"{AUTO_RELOAD_ANNOTATION}=true",
        )
        self.ledger.step(results.RELOAD, text)


_Handler = Callable[[_Conversion, Mapping[str, Any], str], None]
_HANDLERS: Final[dict[str, _Handler]] = {
    "InfisicalConnection": _Conversion.connection,
    "InfisicalAuth": _Conversion.auth,
    "InfisicalSecret": _Conversion.infisical_secret,
    "InfisicalStaticSecret": _Conversion.static_secret,
}
_ORDER: Final = list(_HANDLERS)


def convert(objects: Sequence[Mapping[str, Any]]) -> results.Result:
    """Convert what has an equivalent and note the rest. Reads no Secret; changes nothing."""
    conversion = _Conversion()
    for raw in sorted(objects, key=_rank):
        kind, meta = str(raw.get("kind") or "(no kind)"), _metadata(raw)
        obj = values.object_id(kind, meta.get("namespace"), str(meta.get("name") or "(no name)"))
        if _group(raw) == infisical.GROUP and kind in _HANDLERS:
            _HANDLERS[kind](conversion, raw, obj)
        elif _group(raw) == infisical.GROUP:
            what = "pushes to or leases from the service" if kind in _ELSEWHERE else "an unknown kind"
            conversion.ledger.note(obj, "spec", f"{what}; secretferry only syncs secrets into the cluster")
        elif kind in _WORKLOADS:
            conversion.workload(raw, kind, obj)
        else:
            conversion.ledger.result.skipped.append(obj)
    for login in conversion.logins.values():
        identities.finish(login, conversion.ledger)
    for sync in conversion.syncs:
        syncs.finish(sync, conversion.ledger)
    result = conversion.ledger.done()
    if not result.manifests and not result.notes:
        what = "holds no InfisicalSecret, InfisicalStaticSecret or InfisicalAuth"
        result.notes.append(results.Note("(input)", "kind", what))
    return result


def _rank(raw: Mapping[str, Any]) -> int:
    kind = raw.get("kind")
    return _ORDER.index(kind) if _group(raw) == infisical.GROUP and kind in _ORDER else len(_ORDER)


def _group(raw: Mapping[str, Any]) -> str:
    return str(raw.get("apiVersion") or "").partition("/")[0]


def _metadata(raw: Mapping[str, Any]) -> dict[str, Any]:
    meta = raw.get("metadata")
    return meta if isinstance(meta, dict) else {}
