"""``POST /api/v1/events/subscribe/project-events``: refusals as JSON, then an SSE stream.

Refusals happen before the stream starts (plan → 400, cap → 429, permission → 403). Once open the
stream sends nothing on connect, a heartbeat every ``heartbeat_seconds`` and, every
``recheck_seconds``, re-checks the token (one use) and permissions; on failure it sends the
generation's error frame and closes. What the items mean and every byte written are the running
generation's (``generations``); the bytes go out untouched, with no framing added here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pydantic
from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from sse_starlette import EventSourceResponse

from secretferry.devserver import auth, events, generations
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import ApiError, BadRequest, RateLimited
from secretferry.devserver.permissions import EVENT_ACTIONS, SECRET_EVENTS
from secretferry.devserver.schemas import Subscribe
from secretferry.devserver.state import DevState

router = APIRouter()
_TICK = b""
# The real server's headers (getSSEHeaders); sse-starlette adds Connection and X-Accel-Buffering,
# and an explicit content type keeps Starlette from appending "; charset=utf-8".
_HEADERS = {"Cache-Control": "no-cache", "Content-Type": "text/event-stream"}


def _registrations(generation: generations.Generation, body: Subscribe) -> list[events.Registration]:
    """The items as this generation reads them; a malformed one is a 422 like any body error."""
    try:
        return generation.parse_registrations(body.registrations)
    except pydantic.ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ("body", "register", *err["loc"])} for err in exc.errors()]
        ) from exc


def _check_permissions(state: DevState, subscriber: events.Subscriber) -> None:
    for reg in subscriber.registrations:
        kinds = [reg.event] if reg.event else list(events.EVENT_KINDS)
        for kind in kinds:
            state.permissions.check(
                subscriber.identity_id,
                subscriber.project_id,
                state.now(),
                action=EVENT_ACTIONS[kind],
                subject=SECRET_EVENTS,
                environment=reg.environment or "",
                secret_path=reg.secret_path or "/",
            )


@router.post("/api/v1/events/subscribe/project-events")
async def subscribe(body: Subscribe, caller: CallerDep, state: StateDep) -> EventSourceResponse:
    generation = generations.get(state.config.event_generation)
    registrations = _registrations(generation, body)
    if not state.config.events_plan:
        raise BadRequest(
            "Failed to subscribe to events: your current plan does not include event subscriptions. "
            "Upgrade to an Enterprise plan to use this feature."
        )
    project = state.store.require_project(body.projectId)
    subscriber = events.Subscriber(project.id, caller.identity_id, caller.token, registrations)
    _check_permissions(state, subscriber)
    if state.bus.count(project.id, caller.identity_id) >= state.config.stream_cap:
        raise RateLimited(
            f"Too many open event streams for this identity and project (limit {state.config.stream_cap})",
            retry_after_seconds=60,
        )
    state.bus.open(subscriber)
    state.stats.counters["streamsOpened"] += 1
    # ping=0: sse-starlette's own comment pings are off; this stream writes the service's heartbeats.
    return EventSourceResponse(_stream(state, subscriber, generation), ping=0, headers=_HEADERS)


async def _stream(
    state: DevState, subscriber: events.Subscriber, generation: generations.Generation
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    opened = loop.time()
    next_ping = opened + state.config.heartbeat_seconds
    next_check = opened + state.config.recheck_seconds
    try:
        while True:
            faults = state.faults.current
            deadline = min(next_ping, next_check)
            if faults.drop_streams_after_seconds is not None:
                deadline = min(deadline, opened + faults.drop_streams_after_seconds)
            item: bytes | None
            try:
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    item = await subscriber.queue.get()
            except TimeoutError:
                item = _TICK
            if item is events.DROP:
                return
            if item:
                yield item
                continue
            now = loop.time()
            if (
                faults.drop_streams_after_seconds is not None
                and now >= opened + faults.drop_streams_after_seconds
            ):
                return
            if now >= next_check:
                next_check = now + state.config.recheck_seconds
                failure = _recheck(state, subscriber)
                if failure is not None:
                    frame = generation.error_frame(failure)
                    if frame:
                        yield frame
                    return
            if now >= next_ping:
                next_ping = now + state.config.heartbeat_seconds
                if not faults.silent_streams:
                    yield generation.heartbeat()
    finally:
        state.bus.close(subscriber)


def _recheck(state: DevState, subscriber: events.Subscriber) -> ApiError | None:
    """Token still valid (counts one use) and permissions still held, else the error to send."""
    try:
        auth.use_token(state, subscriber.token)
        _check_permissions(state, subscriber)
    except ApiError as exc:
        return exc
    return None
