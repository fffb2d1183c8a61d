"""A kubeconfig read into an :class:`access.Access`: the fields the operator needs, as kubectl reads them.

Why our own reader: kubernetes_asyncio's loader comes with its package, and importing it loads
about 1,170 modules (690 generated models): ~59 MiB resident and over a second before the first
request — for an operator that sends raw JSON and needs only where the apiserver is, how to trust
it and who we are.

What is read, from the current context (or ``context``)::

    cluster  server, certificate-authority(-data), insecure-skip-tls-verify, tls-server-name
    user     client-certificate(-data) + client-key(-data); token, else tokenFile (read once),
             else auth-provider config access-token; else username + password (Basic);
             else (``exec_plugins=True``) the exec credential plugin (execplugin.py)

Several files (``a:b``, as in ``$KUBECONFIG``) merge as in kubectl and kopf's own kubeconfig
login: missing files are skipped, and the first file to name a context, cluster, user or the
current context wins. Relative paths are relative to the file that names them.

Exec credential plugins (``users[].user.exec``: EKS, GKE, AKS) are read for the command-line
tools only (``exec_plugins=True``; :mod:`secretferry.kube.execplugin` runs them). As in client-go,
a token, token file, Basic auth or client certificate of the same user wins and the plugin is not
run. The operator does not take them: kopf's kubeconfig login cannot run a plugin, so its watches
would fail with 401s while our client worked; a user with nothing else is reported there as
:class:`errors.NotConfigured` naming it. Refreshing auth providers (the old ``gcp``/``azure``
``auth-provider`` without an ``access-token``) are not supported anywhere: client-go removed
them in 1.26 in favour of exec plugins.

``tokenFile`` is the kubeconfig's field (client-go's ``json:"tokenFile"``); ``token-file`` is
not one (client-go ignores it), so it is not read either.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from secretferry.kube import access, errors, execplugin


@dataclass(frozen=True)
class _Entry:
    """A named cluster/user/context and the directory its relative paths start from."""

    value: Mapping[str, Any]
    base: Path


def load(paths: str, *, context: str | None = None, exec_plugins: bool = False) -> access.Access:
    """The access described by the kubeconfig file(s) ``paths`` (``os.pathsep``-separated, ``~``
    expanded). Every problem raises :class:`errors.NotConfigured` saying what is missing where.
    ``exec_plugins``: a user authenticating only through an exec plugin gets ``exec_plugin`` set
    (the command-line tools) instead of being refused (the operator)."""
    files = [Path(p).expanduser() for p in paths.split(os.pathsep) if p.strip()]
    current: str | None = None
    sections: dict[str, dict[str, _Entry]] = {"contexts": {}, "clusters": {}, "users": {}}
    found = False
    for path in files:
        if not path.is_file():
            continue
        found = True
        document = _read_yaml(path)
        if current is None and document.get("current-context"):
            current = str(document["current-context"])
        for section, entries in sections.items():
            for item in document.get(section) or []:
                if not isinstance(item, Mapping) or "name" not in item:
                    raise _problem(f"{path}: every entry of {section} needs a name")
                entries.setdefault(str(item["name"]), _Entry(_section_body(item, section), path.parent))
    if not found:
        raise _problem(f"no kubeconfig file found at {paths}")
    name = context or current
    if not name:
        raise _problem(f"{paths}: no current-context is set")
    ctx = _named(sections["contexts"], name, what="context", paths=paths)
    cluster = _named(sections["clusters"], str(ctx.value.get("cluster", "")), what="cluster", paths=paths)
    user_name = ctx.value.get("user")
    user = _named(sections["users"], str(user_name), what="user", paths=paths) if user_name else None
    return _access(cluster, user, user_name=str(user_name or ""), exec_plugins=exec_plugins)


def context_namespace(paths: str, *, context: str | None = None) -> str | None:
    """The namespace the current context (or ``context``) names, as kubectl defaults ``-n`` to it;
    None when it names none or no file is found. Read for the kubectl plugin, never the operator
    (which is told its namespaces by its settings)."""
    current: str | None = context
    for path in (Path(p).expanduser() for p in paths.split(os.pathsep) if p.strip()):
        if not path.is_file():
            continue
        document = _read_yaml(path)
        current = current or (str(document["current-context"]) if document.get("current-context") else None)
        for item in document.get("contexts") or []:
            if isinstance(item, Mapping) and current is not None and item.get("name") == current:
                namespace = _section_body(item, "contexts").get("namespace")
                return str(namespace) if namespace else None
    return None


def _access(cluster: _Entry, user: _Entry | None, *, user_name: str, exec_plugins: bool) -> access.Access:
    c = cluster.value
    server = str(c.get("server") or "").rstrip("/")
    if not server:
        raise _problem("the current context's cluster has no server")
    u = user.value if user is not None else {}
    ubase = user.base if user is not None else cluster.base
    ca_pem, cert_pem, key_pem = (
        _data(c, "certificate-authority-data"),
        _data(u, "client-certificate-data"),
        _data(u, "client-key-data"),
    )
    found = access.Access(
        server=server,
        # A field given as data wins over its file, as in kubectl.
        ca_file=None if ca_pem else _path(c, "certificate-authority", cluster.base),
        ca_pem=None if ca_pem is None else ca_pem.decode("ascii", errors="replace"),
        cert_file=None if cert_pem else _path(u, "client-certificate", ubase),
        cert_pem=cert_pem,
        key_file=None if key_pem else _path(u, "client-key", ubase),
        key_pem=key_pem,
        insecure=bool(c.get("insecure-skip-tls-verify", False)),
        tls_server_name=c.get("tls-server-name") or None,
        authorization=_authorization(u, ubase),
    )
    if found.authorization is not None or found.has_client_certificate:
        return found  # as client-go: a credential at hand wins, the exec plugin is not run
    if "exec" in u and exec_plugins:
        section = u["exec"] if isinstance(u["exec"], Mapping) else {}
        plugin = execplugin.parse_config(
            section, base=ubase, user=user_name, cluster=c, cluster_base=cluster.base
        )
        return dataclasses.replace(found, exec_plugin=plugin)
    if "exec" in u:
        raise _problem(
            f"user {user_name!r} authenticates through an exec credential plugin, which the operator"
            " cannot use (kopf's login does not run one; `kubectl secretferry` and `secretferry"
            " template --live` do); use a token, a token file or a client certificate"
        )
    if "auth-provider" in u:
        raise _problem(
            f"user {user_name!r} authenticates through an auth provider without an access-token, which"
            " is not supported (client-go replaced auth providers with exec credential plugins)"
        )
    return found


def _authorization(user: Mapping[str, Any], base: Path) -> str | None:
    """The Authorization header, in kubernetes_asyncio's order: token, token file, auth-provider
    access-token, then username + password. Messages name fields and files, never values."""
    if token := user.get("token"):
        return f"Bearer {token}"
    if token_file := _path(user, "tokenFile", base):
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise _problem(f"the tokenFile {token_file} cannot be read ({type(exc).__name__})") from exc
        if token:
            return f"Bearer {token}"
    provider = user.get("auth-provider") or {}
    if isinstance(provider, Mapping) and (token := (provider.get("config") or {}).get("access-token")):
        return f"Bearer {token}"
    if user.get("username") and user.get("password"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode("ascii")
        return f"Basic {basic}"
    return None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        # Not chained: a YAML error quotes the offending line, which may hold a token or key.
        raise _problem(f"{path} cannot be read as YAML ({type(exc).__name__})") from None
    if not isinstance(document, Mapping):
        raise _problem(f"{path} is not a kubeconfig (not a mapping)")
    return document


def _section_body(item: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    body = item.get(section[:-1]) or {}  # contexts → context, clusters → cluster, users → user
    return body if isinstance(body, Mapping) else {}


def _named(entries: Mapping[str, _Entry], name: str, *, what: str, paths: str) -> _Entry:
    entry = entries.get(name)
    if entry is None:
        raise _problem(f"{paths}: {what} {name!r} is not defined")
    return entry


def _path(section: Mapping[str, Any], key: str, base: Path) -> Path | None:
    value = section.get(key)
    if not value:
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def _data(section: Mapping[str, Any], key: str) -> bytes | None:
    value = section.get(key)
    if not value:
        return None
    try:
        return base64.standard_b64decode(str(value))  # lenient about line breaks, as kubectl
    except (binascii.Error, ValueError):
        raise _problem(f"{key} is not valid base64") from None  # never echo key material


def _problem(message: str) -> errors.NotConfigured:
    return errors.NotConfigured(0, "NotConfigured", f"no usable Kubernetes configuration: {message}")


__all__ = ["context_namespace", "load"]
