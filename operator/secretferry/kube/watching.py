"""Our own LIST+WATCH: a consistent stream of an object kind's changes, forever.

Why not kopf's intake: see docs/architecture.md "Scale decisions" — this loop is what makes a new object
visible within milliseconds even during a 10,000-object startup storm.

Shape (after kopf's ``watching.py``): :func:`list_pages` and :func:`watch_once` each do one thing
over one request and end; :func:`watch` is the small infinite loop around them::

    LIST (paginated) → ADDED per item → SYNCED → WATCH from the list's resourceVersion
     └─ meanwhile: WATCH from the version of a one-item LIST made just before, stopped at SYNCED
        ├─ server closes the stream (timeoutSeconds) → WATCH again from the last resourceVersion
        ├─ 410 Gone (answer or ERROR event)         → LIST again (and SYNCED again)
        └─ connection/5xx/other API error           → sleep (capped, jittered backoff), WATCH again

``SYNCED`` (with an empty object) follows every complete LIST, so a consumer can drop what it
knew but did not see in that listing (deletions missed while disconnected).

Why the early watch: listing 10,000 objects took one to three seconds here (the apiserver's
serialising and our decoding), and a change made meanwhile would otherwise wait for all of it. The
early watch passes it on at once (``WatchEvent.listed`` False). Events it delivers may repeat, or
be older than, list items; the main watch starts from the list's version afterwards and replays
every change after it, so the last word is always current. Consumers must treat events as
idempotent upserts (ours do).

Close the generator (``contextlib.aclosing``) when done early, so its connection closes at once.

``metadata_only``: the apiserver sends ``PartialObjectMetadata`` (name, labels, annotations,
versions; no ``data``, no ``spec``), as client-go's metadata informers ask. For watches of
objects we only need the metadata of (every Secret of a namespace, for opt-in annotations), so
no Secret value is ever received, decoded or held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from secretferry import backoff
from secretferry.kube import errors
from secretferry.kube.client import Kube, QueryValue

logger = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED", "SYNCED"]

# Objects per LIST page. Since the early watch delivers changes made during a LIST, the page size
# no longer decides how long a new object waits; it trades round trips against the transient
# memory of a decoded page (2,000 Secrets with managedFields ≈ 25 MB, and at a restart two such
# LISTs run at once: 186 to 192 MiB RSS after a restart with 10,000 objects at 2,000 per page).
LIST_PAGE_SIZE = 1000
# The server ends each watch after this long; re-watching from the last resourceVersion costs one
# cheap request, and a short-ish period bounds how long a silently broken connection can linger.
WATCH_TIMEOUT_SECONDS = 300
# Read-timeout slack over WATCH_TIMEOUT_SECONDS: bookmarks arrive about once a minute, and the
# server may close a little late under load.
_READ_SLACK_SECONDS = 60.0
BACKOFF_INITIAL_SECONDS = 0.5  # a flapping apiserver connection usually recovers within a second
BACKOFF_MAX_SECONDS = 30.0  # cap: a recovered apiserver is seen within half a minute
# What client-go's metadata client asks for: lists as PartialObjectMetadataList, watch events
# carrying PartialObjectMetadata. No fallback to full objects: refused (406) rather than sent data.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _accept(metadata_only: bool, representation: str) -> str | None:
    """The Accept header for ``Kube.request``/``stream``: None (JSON) for whole objects."""
    return representation if metadata_only else None


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: dict[str, Any]
    listed: bool = False
    """Whether the object came from a LIST (state at start) rather than a watch (a change)."""


def scoped_path(path: str, namespace: str | None) -> str:
    """``/api/v1/secrets`` + ``ns`` → ``/api/v1/namespaces/ns/secrets`` (cluster-wide if ``None``)."""
    if not namespace:
        return path
    prefix, _, plural = path.rstrip("/").rpartition("/")
    return f"{prefix}/namespaces/{namespace}/{plural}"


async def list_pages(
    kube: Kube,
    *,
    path: str,
    label_selector: str | None = None,
    page_size: int = LIST_PAGE_SIZE,
    metadata_only: bool = False,
) -> AsyncGenerator[tuple[list[dict[str, Any]], str], None]:
    """One paginated LIST: yields ``(items, resourceVersion)`` per page; the last version is the list's.

    Items get the ``apiVersion``/``kind`` that list answers leave out, so consumers see whole objects.
    """
    token: str | None = None
    while True:
        query: dict[str, QueryValue] = {
            "limit": page_size,
            "labelSelector": label_selector,
            "continue": token,
        }
        answer = await kube.request("GET", path, query=query, accept=_accept(metadata_only, _METADATA_LIST))
        api_version = str(answer.get("apiVersion", ""))
        kind = str(answer.get("kind", "")).removesuffix("List")
        items: list[dict[str, Any]] = answer.get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        metadata = answer.get("metadata") or {}
        yield items, str(metadata.get("resourceVersion", ""))
        token = metadata.get("continue") or None
        if token is None:
            return


def _change(raw: dict[str, Any]) -> WatchEvent | None:
    """A raw watch event as a WatchEvent; None for what is not a change (BOOKMARK)."""
    if raw.get("type") in ("ADDED", "MODIFIED", "DELETED"):
        return WatchEvent(raw["type"], raw.get("object") or {})
    return None


async def _current_version(kube: Kube, path: str, label_selector: str | None, metadata_only: bool) -> str:
    """The collection's resourceVersion now, from a one-item LIST (cheap at any size)."""
    query: dict[str, QueryValue] = {"limit": 1, "labelSelector": label_selector}
    answer = await kube.request("GET", path, query=query, accept=_accept(metadata_only, _METADATA_LIST))
    return str((answer.get("metadata") or {}).get("resourceVersion", ""))


@dataclass(frozen=True)
class _Listed:
    resource_version: str


async def _list_while_watching(
    kube: Kube,
    *,
    path: str,
    label_selector: str | None,
    timeout_seconds: int,
    list_after: asyncio.Event | None = None,
    metadata_only: bool = False,
) -> AsyncGenerator[WatchEvent | _Listed, None]:
    """A full LIST (``listed`` events, then ``_Listed``) with changes made meanwhile interleaved.
    The LIST waits for ``list_after`` if given; the early watch does not."""
    since = await _current_version(kube, path, label_selector, metadata_only)
    out: asyncio.Queue[WatchEvent | _Listed | BaseException] = asyncio.Queue()

    async def listing() -> None:
        try:
            if list_after is not None:
                await list_after.wait()
            listed = ""
            pages = list_pages(kube, path=path, label_selector=label_selector, metadata_only=metadata_only)
            async for items, page_version in pages:
                listed = page_version
                for item in items:
                    out.put_nowait(WatchEvent("ADDED", item, listed=True))
            out.put_nowait(_Listed(listed))
        except Exception as exc:  # handed to the consumer, which raises it in the caller's frame
            out.put_nowait(exc)

    async def early() -> None:
        try:
            async for raw in watch_once(
                kube,
                path=path,
                resource_version=since,
                label_selector=label_selector,
                timeout_seconds=timeout_seconds,
                metadata_only=metadata_only,
            ):
                event = _change(raw)
                if event is not None:
                    out.put_nowait(event)
        except errors.KubeError as exc:
            # Only a shortcut: the main watch after the LIST replays every change anyway.
            logger.debug("early watch of %s ended: %s", path, exc)

    tasks = [asyncio.create_task(listing()), asyncio.create_task(early())]
    try:
        while True:
            item = await out.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, _Listed):
                return
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _lines(content: aiohttp.StreamReader, path: str) -> AsyncIterator[bytes]:
    """Newline-delimited records from the stream, with no line-length limit (a Secret can be 1 MiB)."""
    buffer = b""
    try:
        async for chunk in content.iter_any():
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if line.strip():
                    yield line
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise errors.Unavailable(
            0, type(exc).__name__, f"watch {path} broke: {exc or type(exc).__name__}"
        ) from exc
    if buffer.strip():
        yield buffer


async def watch_once(
    kube: Kube,
    *,
    path: str,
    resource_version: str,
    label_selector: str | None = None,
    timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    metadata_only: bool = False,
) -> AsyncGenerator[dict[str, Any], None]:
    """One WATCH request: yields raw ``{"type", "object"}`` events (BOOKMARK included) until the
    server ends it. An ERROR event raises its ``KubeError`` (``Gone`` for an expired version)."""
    query: dict[str, QueryValue] = {
        "watch": True,
        "resourceVersion": resource_version,
        "allowWatchBookmarks": True,
        "timeoutSeconds": timeout_seconds,
        "labelSelector": label_selector,
    }
    async with kube.stream(
        path,
        query=query,
        read_timeout_seconds=timeout_seconds + _READ_SLACK_SECONDS,
        accept=_accept(metadata_only, _METADATA_WATCH),
    ) as content:
        async for line in _lines(content, path):
            try:
                event = json.loads(line)
            except ValueError as exc:
                raise errors.Unavailable(0, "BadWatchLine", f"watch {path}: undecodable line") from exc
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise errors.from_status(int(status.get("code") or 500), status)
            yield event


async def watch(
    kube: Kube,
    *,
    path: str,
    label_selector: str | None = None,
    namespace: str | None = None,
    timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    list_after: asyncio.Event | None = None,
    metadata_only: bool = False,
) -> AsyncGenerator[WatchEvent, None]:
    """Infinite ADDED/MODIFIED/DELETED stream of ``path`` (a collection: ``/api/v1/secrets``,
    ``/apis/secretferry.io/v1alpha1/secretsyncs``), with ``SYNCED`` after every full listing.

    ``list_after``: the LISTs wait until it is set (changes are passed on meanwhile): a caller
    with more urgent requests keeps the apiserver free of a 10,000-object LIST until they are done.
    """
    full_path = scoped_path(path, namespace)
    resource_version: str | None = None
    # Equal jitter: at least half the ceiling, so a watch that keeps failing never re-LISTs in a
    # tight loop against a struggling apiserver, yet replicas and watches still spread out.
    retry = backoff.Backoff(BACKOFF_INITIAL_SECONDS, BACKOFF_MAX_SECONDS, jitter=backoff.EQUAL_JITTER)
    while True:
        try:
            if resource_version is None:
                listing = _list_while_watching(
                    kube,
                    path=full_path,
                    label_selector=label_selector,
                    timeout_seconds=timeout_seconds,
                    list_after=list_after,
                    metadata_only=metadata_only,
                )
                listed = ""
                async with contextlib.aclosing(listing):  # closing us stops its requests at once
                    async for item in listing:
                        if isinstance(item, _Listed):
                            listed = item.resource_version
                        else:
                            yield item
                resource_version = listed
                yield WatchEvent("SYNCED", {})
            async for raw in watch_once(
                kube,
                path=full_path,
                resource_version=resource_version,
                label_selector=label_selector,
                timeout_seconds=timeout_seconds,
                metadata_only=metadata_only,
            ):
                retry.reset()
                obj: dict[str, Any] = raw.get("object") or {}
                resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                event = _change(raw)
                if event is not None:
                    yield event
            retry.reset()  # a clean end of the stream: the server's timeout, not a failure
        except errors.Gone:
            logger.info("watch %s: resourceVersion expired, listing again", full_path)
            resource_version = None
        except errors.KubeError as exc:
            delay = retry.next_delay()
            logger.warning("watch %s failed (%s); retrying in %.1f s", full_path, exc, delay)
            await asyncio.sleep(delay)
