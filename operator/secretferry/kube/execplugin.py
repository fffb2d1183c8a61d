"""Exec credential plugins: a kubeconfig's ``users[].user.exec``, run as kubectl runs it.

Why: EKS, GKE and AKS kubeconfigs carry no credential, only a command that prints one
(``aws eks get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``). The command-line tools
(``kubectl secretferry``, ``secretferry template --live``) promise to work with the user's own
kubeconfig, so they run that command the way client-go's ``plugin/pkg/client/auth/exec`` does:

- ``command`` with ``args``, never through a shell; a command containing a path separator is
  relative to the kubeconfig that names it (client-go's ``ResolveLocalPaths``), a bare name is
  looked up on ``PATH``;
- the environment is ours plus ``env`` (the kubeconfig's entries win) plus
  ``KUBERNETES_EXEC_INFO``: ``{"apiVersion": <exec apiVersion>, "kind": "ExecCredential",
  "spec": {"interactive": false, "cluster": {...}}}``, ``cluster`` only with
  ``provideClusterInfo`` (server, tls-server-name, insecure-skip-tls-verify,
  certificate-authority-data, and the cluster's ``client.authentication.k8s.io/exec`` extension
  as ``config``);
- no terminal: stdin is closed and ``spec.interactive`` is false. A plugin that must prompt
  (``interactiveMode: Always``) is refused when the kubeconfig is read, with a message saying so;
- its standard output must be an ``ExecCredential`` of the configured apiVersion
  (``client.authentication.k8s.io/v1`` or ``v1beta1``; v1alpha1 left client-go in 1.24) whose
  ``status`` holds a ``token``, or ``clientCertificateData`` and ``clientKeyData``, and maybe an
  ``expirationTimestamp``.

Caching, expiry and the re-run after a 401 are :mod:`secretferry.kube.execcache`'s; this module
reads the configuration and runs the command once.

What never appears in a message: the credential. stdout is parsed, never quoted; the tail of
stderr is quoted on a failure (what the plugin says is the diagnosis), with anything shaped like
a token (a JWT, a long base64/hex run, ``token: …``) replaced by ``<redacted>``, and controls
escaped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from secretferry import controlchars
from secretferry.kube import errors

API_VERSIONS: Final = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_INFO_ENV: Final = "KUBERNETES_EXEC_INFO"
CLUSTER_CONFIG_EXTENSION: Final = "client.authentication.k8s.io/exec"  # cluster.extensions[].name
INTERACTIVE_MODES: Final = ("Never", "IfAvailable", "Always")
# client-go waits for a plugin without limit; a tool at a terminal should not hang for ever on one
# stuck behind a network call. Two minutes covers a cloud CLI's slowest token exchange.
RUN_TIMEOUT_SECONDS: Final = 120.0
_STDERR_TAIL_CHARS: Final = 600  # enough for the last few lines of a CLI's error, short for a terminal
_SECRETISH: Final = re.compile(
    r"eyJ[\w-]+\.[\w-]+\.[\w-]*"  # a JWT (ServiceAccount, OIDC and most cloud tokens)
    r"|k8s-aws-v1\.[\w-]+"  # EKS's presigned-URL token
    # token=v, token: v, "token": "v" (not "get-token: …", a program naming itself)
    r"|(?<![\w-])(?i:(?:access[_-]?)?(?:token|password|secret))[\"']?\s*[:=]\s*[\"']?[^\s\"',}]+"
    r"|[A-Za-z0-9+/_-]{32,}={0,2}"  # a long base64 or hex run: redacted when it looks random (_random)
)
_KEY_PREFIX: Final = re.compile(r"^((?i:(?:access[_-]?)?(?:token|password|secret))[\"']?\s*[:=]\s*[\"']?)")


@dataclass(frozen=True, kw_only=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` section, checked, plus what ``provideClusterInfo`` hands over."""

    command: str  # absolute, or a bare name looked up on PATH
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may carry a secret
    api_version: str
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"
    cluster: Mapping[str, Any] | None = field(default=None, repr=False)  # spec.cluster, or None
    user: str = ""  # the kubeconfig user's name, for messages

    @property
    def shown(self) -> str:
        """How messages name the plugin: the user and the command, never args or env."""
        return f"the exec credential plugin {self.command!r} of user {self.user!r}"


@dataclass(frozen=True, kw_only=True)
class ExecCredential:
    """What one run printed: a token and/or a client certificate, and until when it holds."""

    token: str | None = field(default=None, repr=False)
    cert_pem: bytes | None = None
    key_pem: bytes | None = field(default=None, repr=False)
    expires_at: datetime | None = None  # None: until the apiserver refuses it


def parse_config(
    section: Mapping[str, Any],
    *,
    base: Path,
    user: str,
    cluster: Mapping[str, Any],
    cluster_base: Path,
) -> ExecPlugin:
    """The checked ``exec`` section; every problem raises :class:`errors.NotConfigured` naming the
    field (never an env value). ``cluster``/``cluster_base``: the context's cluster, for
    ``provideClusterInfo``."""
    command = str(section.get("command") or "")
    if not command:
        raise _not_configured(user, "exec has no command")
    api_version = str(section.get("apiVersion") or "")
    if api_version not in API_VERSIONS:
        raise _not_configured(
            user,
            f"exec apiVersion {api_version or '(none)'!r} is not supported;"
            f" use one of {', '.join(API_VERSIONS)}",
        )
    mode = section.get("interactiveMode")
    if not mode:
        if api_version.endswith("/v1"):  # client-go requires it from v1 on; v1beta1 defaults it
            raise _not_configured(user, f"exec interactiveMode must be set for {api_version}")
        mode = "IfAvailable"
    if mode not in INTERACTIVE_MODES:
        raise _not_configured(
            user, f"exec interactiveMode {mode!r} is not one of {', '.join(INTERACTIVE_MODES)}"
        )
    if mode == "Always":
        raise _not_configured(
            user,
            f"its exec credential plugin {command!r} has interactiveMode Always: it must prompt at a"
            " terminal, and secretferry runs plugins without one. Log in with that plugin first"
            " (e.g. through kubectl) if it can then run unattended and set interactiveMode IfAvailable,"
            " or use a kubeconfig with a token or a client certificate",
        )
    env: list[tuple[str, str]] = []
    for item in section.get("env") or []:
        if not isinstance(item, Mapping) or not item.get("name"):
            raise _not_configured(user, "every exec env entry needs a name and a value")
        env.append((str(item["name"]), str(item.get("value") or "")))
    if os.sep in command and not Path(command).is_absolute():
        command = str(base / command)
    return ExecPlugin(
        command=command,
        args=tuple(str(a) for a in section.get("args") or []),
        env=tuple(env),
        api_version=api_version,
        install_hint=str(section.get("installHint") or ""),
        interactive_mode=str(mode),
        cluster=_cluster_info(cluster, cluster_base, user=user)
        if section.get("provideClusterInfo")
        else None,
        user=user,
    )


def _cluster_info(cluster: Mapping[str, Any], base: Path, *, user: str) -> dict[str, Any]:
    """client-go's ``ConfigToExecCluster``: the CA as data even when the kubeconfig names a file."""
    info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    if cluster.get("tls-server-name"):
        info["tls-server-name"] = str(cluster["tls-server-name"])
    if cluster.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    ca = cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        path = Path(str(cluster["certificate-authority"])).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            ca = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError as exc:
            raise _not_configured(
                user, f"certificate-authority {path} cannot be read for provideClusterInfo"
            ) from exc
    if ca:
        info["certificate-authority-data"] = str(ca)
    if cluster.get("proxy-url"):
        info["proxy-url"] = str(cluster["proxy-url"])
    if cluster.get("disable-compression"):
        info["disable-compression"] = True
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == CLUSTER_CONFIG_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def exec_info(plugin: ExecPlugin) -> str:
    """``KUBERNETES_EXEC_INFO`` as client-go encodes it (no ``status``; ``interactive`` always
    present, false: stdin is never a terminal here)."""
    spec: dict[str, Any] = {"interactive": False}
    if plugin.cluster is not None:
        spec["cluster"] = dict(plugin.cluster)
    return json.dumps(
        {"kind": "ExecCredential", "apiVersion": plugin.api_version, "spec": spec}, separators=(",", ":")
    )


def environment(plugin: ExecPlugin, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` (our environment), then the kubeconfig's env, then KUBERNETES_EXEC_INFO: later wins."""
    return {**base, **dict(plugin.env), EXEC_INFO_ENV: exec_info(plugin)}


async def run(
    plugin: ExecPlugin, *, env: Mapping[str, str] | None = None, timeout_seconds: float = RUN_TIMEOUT_SECONDS
) -> ExecCredential:
    """Run the plugin once and parse what it prints; failures raise
    :class:`errors.CredentialPluginFailed` with a message fit for a terminal (no credential)."""
    environ = environment(plugin, os.environ if env is None else env)
    executable = plugin.command
    if os.sep not in executable:
        # Looked up on the PATH the plugin will see, as Go's exec.Command does with ours.
        executable = shutil.which(executable, path=environ.get("PATH")) or executable
    try:
        process = await asyncio.create_subprocess_exec(
            executable,
            *plugin.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environ,
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        hint = f"; {plugin.install_hint.strip()}" if plugin.install_hint.strip() else ""
        raise _failed(plugin, f"not found (is it installed and on PATH?){hint}") from exc
    except PermissionError as exc:
        raise _failed(plugin, "cannot be run (permission denied)") from exc
    except OSError as exc:
        raise _failed(plugin, f"cannot be run ({type(exc).__name__})") from exc
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise _failed(plugin, f"did not finish within {timeout_seconds:g} s") from None
    if process.returncode != 0:
        said = stderr_tail(stderr)
        raise _failed(
            plugin, f"exited with status {process.returncode}" + (f": {said}" if said else " (no stderr)")
        )
    return parse_output(stdout, plugin=plugin)


def parse_output(stdout: bytes, *, plugin: ExecPlugin) -> ExecCredential:
    """The credential in a plugin's stdout, checked as client-go checks it."""
    try:
        document = json.loads(stdout)
    except (ValueError, UnicodeDecodeError):
        # Not chained and not quoted: a half-written credential may be in it.
        raise _failed(plugin, "printed no ExecCredential JSON on stdout") from None
    if not isinstance(document, Mapping):
        raise _failed(plugin, "printed JSON that is not an ExecCredential object")
    if document.get("kind") != "ExecCredential":
        raise _failed(plugin, f"printed kind {str(document.get('kind'))!r}, not ExecCredential")
    if document.get("apiVersion") != plugin.api_version:
        raise _failed(
            plugin,
            f"is configured for apiVersion {plugin.api_version} but printed"
            f" {str(document.get('apiVersion') or '(none)')!r}",
        )
    status = document.get("status")
    if not isinstance(status, Mapping):
        raise _failed(plugin, "printed an ExecCredential without status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData") or None, status.get("clientKeyData") or None
    if (cert is None) != (key is None):
        raise _failed(plugin, "printed only one of clientCertificateData and clientKeyData")
    if token is None and cert is None:
        raise _failed(plugin, "printed neither a token nor clientCertificateData/clientKeyData")
    return ExecCredential(
        token=None if token is None else str(token),
        cert_pem=None if cert is None else str(cert).encode(),
        key_pem=None if key is None else str(key).encode(),
        expires_at=_timestamp(status.get("expirationTimestamp"), plugin=plugin),
    )


def _timestamp(value: Any, *, plugin: ExecPlugin) -> datetime | None:
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise _failed(
            plugin, f"printed an expirationTimestamp that is not RFC 3339: {str(value)[:40]!r}"
        ) from None
    if stamp.tzinfo is None:
        raise _failed(plugin, "printed an expirationTimestamp without a time zone")
    return stamp


def stderr_tail(stderr: bytes, *, limit: int = _STDERR_TAIL_CHARS) -> str:
    """The end of what a plugin wrote to stderr, one line, token-shaped runs redacted, controls
    escaped: the diagnosis, never a credential."""
    text = stderr.decode("utf-8", errors="replace").strip()
    text = _SECRETISH.sub(_redact, text)
    text = controlchars.escape(" | ".join(line.strip() for line in text.splitlines() if line.strip()))
    return "…" + text[-limit:] if len(text) > limit else text


def _redact(match: re.Match[str]) -> str:
    found = match.group(0)
    if key := _KEY_PREFIX.match(found):
        return key.group(1) + "<redacted>"  # the field's name stays: it says what was there
    if found.startswith(("eyJ", "k8s-aws-v1.")) or _random(found):
        return "<redacted>"
    return found


def _random(run: str) -> bool:
    """A long run that mixes digits and letters (and, with slashes, upper case): a token or key,
    not a path such as /usr/local/google-cloud-sdk/bin/gcloud."""
    digits, letters = any(c.isdigit() for c in run), any(c.isalpha() for c in run)
    return digits and letters and ("/" not in run or any(c.isupper() for c in run))


def _failed(plugin: ExecPlugin, problem: str) -> errors.CredentialPluginFailed:
    return errors.CredentialPluginFailed(0, "CredentialPluginFailed", f"{plugin.shown} {problem}")


def _not_configured(user: str, problem: str) -> errors.NotConfigured:
    return errors.NotConfigured(
        0, "NotConfigured", f"no usable Kubernetes configuration: user {user!r}: {problem}"
    )


__all__ = [
    "API_VERSIONS",
    "EXEC_INFO_ENV",
    "ExecCredential",
    "ExecPlugin",
    "environment",
    "exec_info",
    "parse_config",
    "parse_output",
    "run",
    "stderr_tail",
]
