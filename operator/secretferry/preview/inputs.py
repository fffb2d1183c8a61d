"""What ``secretferry template`` renders: the SecretSync, the sample values, the template sources.

Everything here turns the user's files and flags into what the operator's pass works with (a
parsed ``SecretSync``, one ``FetchedSource`` per source, a ``template_sources.Reader``), so that
the render itself (``render.py``) is the operator's own code. Errors are :class:`InputError`:
the command prints them and exits 2 (usage), unlike a reason the operator would show (exit 1).

Sample values stand for what the service lists: every source of the SecretSync is given the
same values (its own includeKeys/excludeKeys, rewrite and decoding then apply, as at the
service). Files: a YAML or JSON mapping of key to value, or dotenv lines (``KEY=VALUE``,
``export`` and quotes allowed, ``#`` comments). ``--set KEY=VALUE`` adds or overrides.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pydantic
import yaml

from secretferry.kube import client, customresources, errors, objects
from secretferry.models import errors as model_errors
from secretferry.models import secretsync
from secretferry.reconcile import problems, reasons
from secretferry.reconcile.rendering import template_sources

# A SecretSync read from a file has no uid; an Owner target needs one for its owner reference.
# The printed reference shows this placeholder where the apiserver would put the real uid.
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


class InputError(Exception):
    """A file or flag that cannot be used; the message names the file and what is wrong."""


def load_sync(text: str, *, source: str, namespace: str | None) -> secretsync.SecretSync:
    """The one SecretSync in ``text`` (YAML or JSON; a List or several documents with exactly
    one SecretSync). Raises ``problems.Problem(InvalidSpec)`` for a spec the operator would
    refuse, as it would say it, and :class:`InputError` for anything that is not a SecretSync."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not YAML ({type(exc).__name__})") from None
    found: list[Mapping[str, Any]] = []
    for document in documents:
        items = (
            document.get("items")
            if isinstance(document, Mapping) and document.get("kind") == "List"
            else None
        )
        for item in items if isinstance(items, list) else [document]:
            if isinstance(item, Mapping) and item.get("kind") == secretsync.SECRET_SYNC_KIND:
                found.append(item)
    if len(found) != 1:
        raise InputError(f"{source}: expected exactly one SecretSync, found {len(found)}")
    return parse_sync(found[0], namespace=namespace)


def parse_sync(body: Mapping[str, Any], *, namespace: str | None) -> secretsync.SecretSync:
    """``body`` as the operator parses it, with a namespace (``-n``, else ``default``) and a
    placeholder uid when the file has none (the apiserver's defaults are the CRD's, which the
    model applies too)."""
    meta = dict(body.get("metadata") or {})
    meta["namespace"] = meta.get("namespace") or namespace or "default"
    meta.setdefault("uid", PLACEHOLDER_UID)
    meta.setdefault("generation", 1)
    try:
        return secretsync.SecretSync.from_body({**body, "metadata": meta})
    except pydantic.ValidationError as exc:
        raise problems.Problem(reasons.INVALID_SPEC, model_errors.describe_validation_error(exc)) from None


async def fetch_sync(kube: client.Kube, *, namespace: str, name: str) -> secretsync.SecretSync:
    """The SecretSync as it is in the cluster, read with the user's credentials."""
    path = f"{customresources.collection_path('secretsyncs', namespace=namespace)}/{quote(name, safe='')}"
    try:
        body = await kube.request("GET", path)
    except errors.NotFound:
        raise InputError(f"SecretSync {namespace}/{name} does not exist") from None
    except (errors.CredentialPluginFailed, errors.ExecCredentialRefused) as exc:
        # The user's exec plugin: its own words say what to do (log in again, install it).
        raise InputError(f"reading SecretSync {namespace}/{name}: {exc.message}") from None
    except errors.KubeError as exc:
        raise InputError(f"reading SecretSync {namespace}/{name}: {exc.reason} ({exc.status})") from None
    return parse_sync(body, namespace=namespace)


def load_values(files: Iterable[tuple[str, str]], sets: Sequence[str]) -> dict[str, str]:
    """Key -> value from ``files`` ((name, text) pairs, in order) and then ``--set`` flags."""
    values: dict[str, str] = {}
    for name, text in files:
        values.update(_values_file(text, source=name))
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set {key or item!r}: expected KEY=VALUE")
        values[key] = value
    return values


def _values_file(text: str, *, source: str) -> dict[str, str]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            loaded: Any = json.loads(text)
        except ValueError:
            raise InputError(f"{source}: not JSON") from None  # never quote the file: it holds values
        return _mapping(loaded, source=source)
    if _looks_like_dotenv(text):
        return _dotenv(text, source=source)
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError(f"{source}: neither YAML nor dotenv") from None
    return _mapping(loaded if loaded is not None else {}, source=source)


def _looks_like_dotenv(text: str) -> bool:
    """Lines of KEY=VALUE (``export`` allowed), comments and blanks: dotenv, not YAML."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(lines) and all("=" in line and ":" not in line.partition("=")[0] for line in lines)


def _dotenv(text: str, *, source: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not key:
            raise InputError(f"{source}:{number}: expected KEY=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def _mapping(loaded: Any, *, source: str) -> dict[str, str]:
    if not isinstance(loaded, Mapping):
        raise InputError(f"{source}: expected a mapping of key to value")
    values: dict[str, str] = {}
    for key, value in loaded.items():
        if isinstance(value, (Mapping, list)):
            raise InputError(f"{source}: the value of {key!s} is not text (a service value is a string)")
        values[str(key)] = "" if value is None else _text(value)
    return values


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- templateFrom sources -------------------------------------------------------------------------


class FileSources:
    """``--template-source`` files as a ``template_sources.Reader``: ConfigMaps and Secrets (``data``
    base64 or ``stringData``) whose namespace is the SecretSync's when they name none. What is
    not in the files is missing, as an object that does not exist is to the operator."""

    def __init__(self, files: Iterable[tuple[str, str]], *, namespace: str) -> None:
        self._objects: dict[template_sources.SourceKey, Mapping[str, Any]] = {}
        for name, text in files:
            try:
                documents = [d for d in yaml.safe_load_all(text) if d is not None]
            except yaml.YAMLError as exc:
                raise InputError(f"{name}: not YAML ({type(exc).__name__})") from None
            for document in documents:
                kind = document.get("kind") if isinstance(document, Mapping) else None
                if kind not in ("ConfigMap", "Secret"):
                    raise InputError(f"{name}: a template source is a ConfigMap or a Secret, not {kind}")
                meta = document.get("metadata") or {}
                body = {**document, "metadata": {**meta, "namespace": meta.get("namespace") or namespace}}
                if kind == "Secret" and body.get("stringData"):
                    encoded = {
                        k: base64.b64encode(str(v).encode()).decode() for k, v in body["stringData"].items()
                    }
                    body["data"] = {**(body.get("data") or {}), **encoded}
                self._objects[(kind, body["metadata"]["namespace"], str(meta.get("name", "")))] = body

    async def read(self, key: template_sources.SourceKey) -> template_sources.Found:
        body = self._objects.get(key)
        if body is None:
            return template_sources.Absent.MISSING
        if not template_sources.is_labelled(body.get("metadata") or {}):
            return template_sources.Absent.NOT_LABELLED
        return template_sources.parse(key[0], body)

    def bind(self, sync_key: tuple[str, str], keys: Iterable[template_sources.SourceKey]) -> None:
        """Nothing re-renders here: the command renders once."""


class LiveSources:
    """templateFrom's sources read from the cluster with the user's credentials, as the operator
    reads them: the metadata first, and the data only of an object labelled as a template source."""

    def __init__(self, kube: client.Kube) -> None:
        self._kube = kube

    async def read(self, key: template_sources.SourceKey) -> template_sources.Found:
        _, namespace, name = key
        kind: objects.Kind = "Secret" if key[0] == "Secret" else "ConfigMap"
        try:
            meta = await objects.get_metadata(self._kube, kind=kind, namespace=namespace, name=name)
            if meta is None:
                return template_sources.Absent.MISSING
            if not template_sources.is_labelled(meta):
                return template_sources.Absent.NOT_LABELLED
            body = await objects.get(self._kube, kind=kind, namespace=namespace, name=name)
        except errors.KubeError as exc:
            raise InputError(
                f"reading template source {kind} {namespace}/{name}: {exc.reason} ({exc.status});"
                " pass it with --template-source FILE instead"
            ) from None
        return template_sources.Absent.MISSING if body is None else template_sources.parse(kind, body)

    def bind(self, sync_key: tuple[str, str], keys: Iterable[template_sources.SourceKey]) -> None:
        """Nothing re-renders here: the command renders once."""


def read_files(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """(name, text) of each file; ``-`` is stdin."""
    import sys

    found: list[tuple[str, str]] = []
    for path in paths:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot be read ({type(exc).__name__})") from None
        found.append((str(path), text))
    return found
