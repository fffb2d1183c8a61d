"""What every endpoint group shares: the pooled connection, the token, and the call plumbing.

``ServiceClient`` (``client.py``) is assembled from endpoint groups that all derive from
``ClientBase``; a token view (``with_token``) is the same class over the same connection.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any, Self

import httpx

import secretferry
from secretferry.service import connection, errors, health, models

DEFAULT_USER_AGENT = f"secretferry/{secretferry.__version__}"


def drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    """Leave out what the caller did not give (the service treats absent and null differently)."""
    return {key: value for key, value in body.items() if value is not None}


class ClientBase:
    """Connection, token, lifecycle and the authenticated-call helper."""

    def __init__(
        self,
        base_url: str,
        *,
        access_token: str | None = None,
        verify: ssl.SSLContext | str | bool = True,
        # Seconds to read an ordinary answer (connect is capped at 5 s, see ``connection``): list
        # calls are per scope and small, a slower answer is better retried with backoff.
        timeout: float = 10.0,
        # Seconds of silence after which a stream is dead: above three 15 s heartbeats (45 s).
        stream_read_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        # Called when the host answers again after it was down (``health.HostHealth``).
        on_host_recovered: Callable[[health.HostHealth], None] | None = None,
    ) -> None:
        self._conn = connection.Connection(
            base_url,
            verify=verify,
            timeout=timeout,
            stream_read_timeout=stream_read_timeout,
            transport=transport,
            user_agent=user_agent,
        )
        if on_host_recovered is not None:
            self._conn.health.subscribe(on_host_recovered)
        self._token = access_token
        self._owns_connection = True

    def __repr__(self) -> str:  # the token stays out of logs
        return f"{type(self).__name__}({self._conn.api_root!r}, token={'set' if self._token else 'none'})"

    @property
    def api_root(self) -> str:
        return self._conn.api_root

    @property
    def host_health(self) -> health.HostHealth:
        """Whether this client's host answers; shared by every token view of the pool."""
        return self._conn.health

    def with_token(self, access_token: str) -> Self:
        """A view with ``access_token`` that shares this client's pool (closing it is a no-op)."""
        view = object.__new__(type(self))
        view._conn = self._conn
        view._token = access_token
        view._owns_connection = False
        return view

    async def aclose(self) -> None:
        if self._owns_connection:
            await self._conn.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _required_token(self, endpoint: str) -> str:
        if not self._token:
            raise errors.AuthenticationError(f"{endpoint}: no access token (log in first)")
        return self._token

    async def _authed(
        self,
        model: type[connection.M],
        method: str,
        path: str,
        path_template: str,
        *,
        params: connection.Params = None,
        json_body: object | None = None,
    ) -> connection.M:
        endpoint = f"{method} {path_template}"
        return await self._conn.call(
            model,
            method,
            path,
            endpoint=endpoint,
            token=self._required_token(endpoint),
            params=params,
            json_body=json_body,
        )

    async def _list_scope(
        self, path: str, *, params: connection.Params, etag: str | None
    ) -> models.SecretList | models.NotModified:
        """One list call (v4 or v3 raw: same answer shape); with ``etag`` a 304 is ``NotModified``."""
        endpoint = f"GET {path}"
        token = self._required_token(endpoint)
        headers = {"If-None-Match": etag} if etag else None
        response = await self._conn.send(
            "GET", path, endpoint=endpoint, token=token, params=params, headers=headers
        )
        if response.status_code == 304:
            if not etag:
                raise errors.ProtocolError(f"{endpoint}: 304 to an unconditional request", status_code=304)
            return models.NotModified(etag=response.headers.get("etag") or etag)
        listed = self._conn.validate(
            models.SecretList, self._conn.json(response, endpoint=endpoint), endpoint=endpoint
        )
        listed.etag = response.headers.get("etag")
        return listed
