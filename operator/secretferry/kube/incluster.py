"""In-cluster configuration, read the way client-go's ``rest.InClusterConfig`` reads it.

Why our own reader: kopf's ``login_with_service_account`` hard-codes
``https://kubernetes.default.svc`` and ignores ``KUBERNETES_SERVICE_HOST``/``_PORT``, which the
kubelet sets in every pod; where that name does not resolve (``hostNetwork``, custom DNS) kopf's
watches fail and the operator crash-loops. One reader serves both our client
(:func:`secretferry.kube.client.connect`) and kopf's login handler, so both reach the same
address with the same token. It imports no Kubernetes client: kopf's login must stay light.

Why the token is re-read: a projected ServiceAccount token is short-lived and the kubelet
rewrites the file as it rotates it. client-go re-reads the file once a minute
(``cachingTokenSource``) and keeps the old copy if a read fails; :class:`TokenFile` does the same.

Pure apart from reading the files: the environment and the directory are parameters, and the
clock is injected, so tests fake all three.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from secretferry.kube import errors

log = logging.getLogger(__name__)

ENV_HOST = "KUBERNETES_SERVICE_HOST"  # set by the kubelet in every pod: its presence means "in a pod"
ENV_PORT = "KUBERNETES_SERVICE_PORT"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # the kubelet's mount
TOKEN_FILE = "token"
CA_FILE = "ca.crt"
NAMESPACE_FILE = "namespace"
# client-go's cachingTokenSource period. The kubelet rotates a token at 80 % of its lifetime (at
# least 10 minutes), so a copy a minute old is always still valid.
TOKEN_REREAD_SECONDS = 60.0

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class InClusterConfig:
    """Where the apiserver is and which files prove who we are. The token itself is not kept
    here: it changes under us, so :class:`TokenFile` reads it."""

    server: str  # https://<host>:<port>, IPv6 hosts bracketed
    ca_path: Path
    token_path: Path
    namespace: str | None  # the pod's namespace, when the kubelet mounted the file


@dataclass(frozen=True)
class Token:
    """One read of the token file. ``reread_at`` is when this copy is due for a re-read, not
    the token's own expiry (the apiserver accepts it for much longer)."""

    value: str = field(repr=False)
    reread_at: datetime


def server_url(host: str, port: str) -> str:
    """``https://host:port`` like Go's ``net.JoinHostPort``: an IPv6 literal (it has colons, and
    maybe a ``%zone``) needs brackets, or its last group would read as the port."""
    if (":" in host or "%" in host) and not host.startswith("["):
        host = f"[{host}]"
    return f"https://{host}:{port}"


def load(env: Mapping[str, str], directory: Path) -> InClusterConfig | None:
    """The in-cluster configuration, or ``None`` when not in a pod (``KUBERNETES_SERVICE_HOST``
    unset or empty), so that the caller falls back to a kubeconfig.

    In a pod, a missing port, token or CA file is a misconfiguration (for example
    ``automountServiceAccountToken: false``) and raises :class:`errors.NotConfigured` saying
    which; falling back to a kubeconfig there would only fail later and less clearly.
    """
    host = env.get(ENV_HOST, "").strip()
    if not host:
        return None
    port = env.get(ENV_PORT, "").strip()
    if not port:
        raise _not_configured(f"{ENV_HOST} is set but {ENV_PORT} is not")
    token_path, ca_path = directory / TOKEN_FILE, directory / CA_FILE
    _read_required(token_path, what="ServiceAccount token")  # fail at start-up, not at the first call
    _read_required(ca_path, what="cluster CA certificate")
    return InClusterConfig(
        server=server_url(host, port),
        ca_path=ca_path,
        token_path=token_path,
        namespace=_read_optional(directory / NAMESPACE_FILE),
    )


class TokenFile:
    """The ServiceAccount token file, re-read as the kubelet rotates it.

    Not thread-safe; give each user (our client, kopf's login) its own instance.
    """

    def __init__(
        self, path: Path, *, clock: Clock = utc_now, reread_seconds: float = TOKEN_REREAD_SECONDS
    ) -> None:
        self._path = path
        self._clock = clock
        self._period = timedelta(seconds=reread_seconds)
        self._token: Token | None = None

    def current(self) -> Token:
        """The token for the next request: the copy in hand until it is due, then a fresh read.
        Cheap enough to call before every request."""
        token = self._token
        if token is not None and self._clock() < token.reread_at:
            return token
        return self.reread()

    def reread(self) -> Token:
        """Read the file now.

        An unchanged token that is not yet due comes back as the *same* :class:`Token`, due at the
        same time. kopf needs that: after a 401 it re-runs the login handlers and refuses
        credentials equal to the rejected ones, which is how it stops. A new due time on every
        read would make a rejected token look new and loop 401 → login → 401 without a pause.

        A failed read keeps the previous token (as client-go does), logged and due again a
        period later; without a previous token it raises :class:`errors.NotConfigured`.
        """
        now = self._clock()
        previous = self._token
        try:
            value = _read_required(self._path, what="ServiceAccount token")
        except errors.NotConfigured as exc:
            if previous is None:
                raise
            log.warning("keeping the ServiceAccount token read before: %s", exc.message)
            value = previous.value
        if previous is not None and previous.value == value and now < previous.reread_at:
            return previous
        self._token = Token(value, now + self._period)
        return self._token


def _read_required(path: Path, *, what: str) -> str:
    """The stripped content of a file that must be there. Messages name the file, never its
    content (it may be the token)."""
    try:
        content = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError as exc:
        raise _not_configured(f"the {what} file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise _not_configured(f"the {what} file {path} cannot be read ({type(exc).__name__})") from exc
    if not content:
        raise _not_configured(f"the {what} file {path} is empty")
    return content


def _read_optional(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _not_configured(problem: str) -> errors.NotConfigured:
    return errors.NotConfigured(
        0,
        "NotConfigured",
        f"in-cluster configuration ({ENV_HOST} is set): {problem}; mount a ServiceAccount token "
        "(automountServiceAccountToken) or set SECRETFERRY_KUBECONFIG",
    )


__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "TOKEN_REREAD_SECONDS",
    "InClusterConfig",
    "Token",
    "TokenFile",
    "load",
    "server_url",
    "utc_now",
]
