"""Secrets and ConfigMaps: read, server-side apply, delete — as raw JSON dicts.

Server-side apply is the one write: the apiserver merges our fields with other managers' (the
``Merge`` creation policy keeps keys someone else put there), reports fields another manager owns
as a ``Conflict`` unless ``force``, and stores nothing when the applied intent is unchanged — so a
repeated apply does not bump ``resourceVersion`` nor echo back as a watch event.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from secretferry.kube import errors, managers
from secretferry.kube.client import Kube

Kind = Literal["Secret", "ConfigMap"]
FIELD_MANAGER = managers.LEGACY
"""The default for tools and tests only: the operator writes a target as the SecretSync it is for
(``managers.for_sync``), so that SecretSyncs sharing one object keep each other's keys."""
# The apply content type; JSON is a subset of YAML, so the body is sent as JSON.
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"

_PLURALS: dict[str, str] = {"Secret": "secrets", "ConfigMap": "configmaps"}


def path(kind: Kind, namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{quote(namespace, safe='')}/{_plural(kind)}"
    return base if name is None else f"{base}/{quote(name, safe='')}"


def collection_path(kind: Kind) -> str:
    """``/api/v1/secrets`` or ``/api/v1/configmaps``: the cluster-wide collection a watch starts
    from (``watching.watch`` narrows it to a namespace)."""
    return f"/api/v1/{_plural(kind)}"


def _plural(kind: Kind) -> str:
    try:
        return _PLURALS[kind]
    except KeyError:
        raise ValueError(f"unsupported kind {kind!r}; expected one of {sorted(_PLURALS)}") from None


async def get(kube: Kube, *, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
    """The object as the apiserver returns it, or ``None`` if it does not exist."""
    try:
        return await kube.request("GET", path(kind, namespace, name))
    except errors.NotFound:
        return None


# client-go's metadata client: the object's metadata alone (no data), refused (406) rather than
# answered with the whole object.
_METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


async def get_metadata(kube: Kube, *, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
    """The object's ``metadata`` only (labels, annotations, versions; never ``data``), or ``None``
    if it does not exist: for deciding about an object whose content must not be read."""
    try:
        answer = await kube.request("GET", path(kind, namespace, name), accept=_METADATA_ONLY)
    except errors.NotFound:
        return None
    metadata: dict[str, Any] = answer.get("metadata") or {}
    return metadata


async def get_selected(
    kube: Kube, *, kind: Kind, namespace: str, name: str, label_selector: str
) -> dict[str, Any] | None:
    """The object, only if it exists *and* matches ``label_selector``; else ``None``. The
    apiserver applies the selector, so the data of an object that does not match never leaves it."""
    answer = await kube.request(
        "GET",
        path(kind, namespace),
        query={"labelSelector": label_selector, "fieldSelector": f"metadata.name={name}"},
    )
    for item in answer.get("items") or []:
        if (item.get("metadata") or {}).get("name") == name:
            item.setdefault("kind", kind)
            found: dict[str, Any] = item
            return found
    return None


async def create(
    kube: Kube, manifest: dict[str, Any], *, field_manager: str = FIELD_MANAGER
) -> dict[str, Any]:
    """Create ``manifest``; :class:`errors.AlreadyExists` when the name is taken.

    One request where "read, then apply" takes two: the usual case for a new SecretSync is a
    target that does not exist yet, and at 10,000 of them the saved GET is measurable.
    """
    metadata = manifest.get("metadata") or {}
    return await kube.request(
        "POST",
        path(manifest["kind"], metadata["namespace"]),
        query={"fieldManager": field_manager},
        body=manifest,
    )


async def validate_create(
    kube: Kube, manifest: dict[str, Any], *, field_manager: str = FIELD_MANAGER
) -> None:
    """Ask the apiserver whether it would create ``manifest``, storing nothing (``dryRun=All``):
    validation and admission run as for a real create and raise as it would (``errors.Invalid``
    with ``.fields``, ``errors.Forbidden`` from a quota or a webhook).

    For a Secret whose type must change, which means delete then create: if the create is then
    refused, the Secret is gone. Why a create under ``metadata.generateName`` rather than the
    real name: a dry-run create of a name that exists answers ``AlreadyExists``, which the
    apiserver happens to check after validation (so an invalid object still gets 422), but a 409
    cannot tell "valid" from "not looked at"; a dry-run update is refused outright, ``type`` being
    immutable. A generated name gives a plain success or the real refusal (checked on a real
    apiserver: tests/integration/operator/test_operator_type_change.py). What differs from the
    real create is the name alone, so an admission policy that matches by name is not asked; and
    a quota counts the probe as one more object, so at its limit the change is refused although
    delete-then-create would fit (the safe side: the old object stays, and the message says why).
    """
    metadata = {k: v for k, v in manifest["metadata"].items() if k != "name"}
    metadata["generateName"] = f"{manifest['metadata']['name']}-"
    await kube.request(
        "POST",
        path(manifest["kind"], metadata["namespace"]),
        query={"fieldManager": field_manager, "dryRun": "All"},
        body={**manifest, "metadata": metadata},
    )


async def apply(
    kube: Kube, manifest: dict[str, Any], *, field_manager: str = FIELD_MANAGER, force: bool
) -> dict[str, Any]:
    """Server-side apply ``manifest`` (a complete object of the fields we own); return the result.

    ``force=False`` raises :class:`errors.Conflict` (with ``.conflicts``/``.managers``) when another
    field manager owns a field we set; ``force=True`` takes those fields over.
    """
    kind = manifest.get("kind")
    metadata = manifest.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if kind not in _PLURALS or manifest.get("apiVersion") != "v1":
        raise ValueError(
            f"apply supports v1 Secret and ConfigMap manifests, not {manifest.get('apiVersion')}/{kind}"
        )
    if not namespace or not name:
        raise ValueError("the manifest needs metadata.namespace and metadata.name")
    return await kube.request(
        "PATCH",
        path(kind, namespace, name),
        query={"fieldManager": field_manager, "force": force},
        body=manifest,
        content_type=APPLY_PATCH,
    )


async def remove_keys(
    kube: Kube,
    *,
    kind: Kind,
    namespace: str,
    name: str,
    keys: list[str],
    field_manager: str = FIELD_MANAGER,
) -> dict[str, Any]:
    """Remove ``keys`` from the object's data (absent keys are fine); return the result.

    For keys apply cannot drop: those another field manager also claims. A JSON merge patch with
    ``null`` per key; when nothing is removed the apiserver stores nothing.
    """
    removals: dict[str, None] = dict.fromkeys(keys)
    body: dict[str, Any] = {"data": removals}
    if kind == "ConfigMap":
        body["binaryData"] = removals
    return await kube.request(
        "PATCH",
        path(kind, namespace, name),
        query={"fieldManager": field_manager},
        body=body,
        content_type=MERGE_PATCH,
    )


async def set_managed_fields(
    kube: Kube,
    *,
    kind: Kind,
    namespace: str,
    name: str,
    resource_version: str,
    managed_fields: list[dict[str, Any]],
    field_manager: str = FIELD_MANAGER,
) -> dict[str, Any]:
    """Replace the object's ``metadata.managedFields`` (see ``managers.hand_over``); return the result.

    Only if the object is still at ``resource_version`` (:class:`errors.Conflict` otherwise):
    ownership computed from an older read must not overwrite a newer one. The apiserver takes
    managedFields sent in a patch as the new ownership, and records nothing for ``field_manager``
    because no value changes.
    """
    body = {"metadata": {"resourceVersion": resource_version, "managedFields": managed_fields}}
    return await kube.request(
        "PATCH",
        path(kind, namespace, name),
        query={"fieldManager": field_manager},
        body=body,
        content_type=MERGE_PATCH,
    )


async def delete(kube: Kube, *, kind: Kind, namespace: str, name: str, uid: str | None = None) -> bool:
    """Delete the object; ``False`` if it was already gone.

    With ``uid``, only that incarnation is deleted (a same-named replacement raises ``Conflict``).
    """
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
    try:
        await kube.request("DELETE", path(kind, namespace, name), body=body)
    except errors.NotFound:
        return False
    return True
