"""``POST /api/v1/events/subscribe/project-events``: refusals as JSON, then an SSE stream.

Refusals happen before the stream starts (plan → 400, cap → 429, permission → 403). Once open the
stream sends nothing on connect, a heartbeat every ``heartbeat_seconds`` and, every
``recheck_seconds``, re-checks the token (one use) and permissions; on failure it sends
``event: error`` with the error body and closes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import APIRouter
from sse_starlette import EventSourceResponse, ServerSentEvent

from secretferry.devserver import auth, events
from secretferry.devserver.auth import CallerDep, StateDep
from secretferry.devserver.errors import ApiError, BadRequest, RateLimited, error_body
from secretferry.devserver.permissions import EVENT_ACTIONS, SECRET_EVENTS
from secretferry.devserver.schemas import Subscribe
from secretferry.devserver.state import DevState

router = APIRouter()
LEGACY_HEARTBEAT = b"1\n"
_TICK = b""


def _registrations(body: Subscribe) -> list[events.Registration]:
    out = []
    for item in body.registrations:
        if item.event is not None and item.event not in events.EVENT_KINDS:
            raise BadRequest(f"Unknown event '{item.event}'")
        conditions = item.conditions
        out.append(
            events.Registration(
                event=item.event,
                environment=conditions.environmentSlug if conditions else None,
                secret_path=conditions.secretPath if conditions else None,
            )
        )
    return out


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
    if not state.config.events_plan:
        raise BadRequest(
            "Failed to subscribe to events: your current plan does not include event subscriptions. "
            "Upgrade to an Enterprise plan to use this feature."
        )
    project = state.store.require_project(body.projectId)
    subscriber = events.Subscriber(project.id, caller.identity_id, caller.token, _registrations(body))
    _check_permissions(state, subscriber)
    if state.bus.count(project.id, caller.identity_id) >= state.config.stream_cap:
        raise RateLimited(
            f"Too many open event streams for this identity and project (limit {state.config.stream_cap})",
            retry_after_seconds=60,
        )
    state.bus.open(subscriber)
    state.stats.counters["streamsOpened"] += 1
    # ping=0: sse-starlette's own comment pings are off; this stream writes the service's heartbeats.
    return EventSourceResponse(_stream(state, subscriber), ping=0, sep="\n")


async def _stream(state: DevState, subscriber: events.Subscriber) -> AsyncIterator[bytes | ServerSentEvent]:
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
                    yield ServerSentEvent(
                        json.dumps(
                            error_body(failure.status, failure.name, failure.message, failure.details)
                        ),
                        event="error",
                        sep="\n",
                    )
                    return
            if now >= next_ping:
                next_ping = now + state.config.heartbeat_seconds
                if not faults.silent_streams:
                    yield (
                        LEGACY_HEARTBEAT
                        if state.config.legacy_heartbeat
                        else ServerSentEvent(event="ping", sep="\n")
                    )
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
