"""What becomes of an Event before it is sent: client-go's correlation, per object. Pure; a clock is
injected.

Why: one change at the service can flip a thousand SecretSyncs at once, and a flapping one flips
every second — 6,220 Events in 20 s were measured, each a write to etcd that every Event watcher
reads again. client-go's recorder bounds that per object, and so does this, with its numbers:

- **rate limit per object** (``EventSourceObjectSpamFilter``, tools/record/events_cache.go): a
  token bucket per (reporting controller and instance, regarding object) holding 25 tokens, one
  back every 5 minutes. Every request (a new Event, a series update) takes one; with none left
  the Event is dropped (``secretferry_events_total{result="dropped"}``).
- **aggregation** (``EventAggregator``): an object's Events of one type, reason and action with
  10 different notes within 10 minutes are recorded, from the 10th on, as one Event whose note
  starts "(combined from similar events): " (``secretferry_events_combined_total``).
- **series** (events.k8s.io's ``EventSeries``, tools/events/event_broadcaster.go): an Event equal
  to one posted within the last 6 minutes is not posted again; it is counted into the first one's
  ``series`` (``count``, ``lastObservedTime``), which is patched at most every 30 s — repeats in
  between are counted here and sent with the next update (client-go sends them every 30 minutes).

The clock is the wall clock (``time.time``): a series' ``lastObservedTime`` is a time of day. A
clock stepping back refills no token (elapsed time is never negative).

Memory is bounded as in client-go: each of the three caches keeps the 4,096 most recently used
entries (LRU), whatever the number of objects.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, TypeVar

# client-go tools/record events_cache.go: maxLruCacheEntries, defaultSpamBurst, defaultSpamQPS,
# defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds.
CACHE_ENTRIES: Final = 4096
BURST: Final = 25
REFILL_SECONDS: Final = 300.0
AGGREGATE_NOTES: Final = 10
AGGREGATE_WINDOW_SECONDS: Final = 600.0
COMBINED_PREFIX: Final = "(combined from similar events): "
# client-go tools/events: a series ends 6 minutes after its last occurrence (finishTime).
SERIES_WINDOW_SECONDS: Final = 360.0
# How often one series is patched at most: its count and last time shown lag by this much at
# most while it goes on (client-go's refresh is every 30 minutes).
SERIES_PATCH_SECONDS: Final = 30.0

K = TypeVar("K")
V = TypeVar("V")
Key = tuple[str, ...]
Action = Literal["post", "patch", "count", "drop"]


class _Lru(Generic[K, V]):
    """A dict that forgets its least recently used entry beyond ``size`` entries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Notes:
    notes: set[str]
    last: float


@dataclass
class Series:
    """An Event posted once and counted since: what a series update sends."""

    key: Key
    count: int
    last_observed: float
    sent_at: float
    name: str | None = None
    """The posted Event's name (set once the post succeeded); None while it is being posted."""


@dataclass(frozen=True)
class Decision:
    """``post`` a new Event; ``patch`` the series of ``series.name``; ``count`` a repeat in memory
    only; ``drop`` it (over the rate limit). ``note`` is what to post (combined or not)."""

    action: Action
    note: str
    combined: bool
    series: Series | None = field(default=None)


class Correlator:
    """The correlation of one process's Events (see the module docstring)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        cache_entries: int = CACHE_ENTRIES,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
    ) -> None:
        self._clock = clock
        self._burst = burst
        self._refill_seconds = refill_seconds
        self._buckets: _Lru[Key, _Bucket] = _Lru(cache_entries)
        self._notes: _Lru[Key, _Notes] = _Lru(cache_entries)
        self._series: _Lru[Key, Series] = _Lru(cache_entries)

    def decide(
        self, *, source: Key, regarding: Key, type: str, reason: str, action: str, note: str
    ) -> Decision:
        """What to do with this Event. ``source``: reporting controller and instance;
        ``regarding``: the object (apiVersion, kind, namespace, name, uid)."""
        now = self._clock()
        obj = source + regarding
        group = (*obj, type, reason, action)
        combined = self._aggregate(group, note, now)
        if combined:
            note = COMBINED_PREFIX + note
            key = (*group, COMBINED_PREFIX)  # every combined note counts into one Event
        else:
            key = (*group, note)
        series = self._series.get(key)
        if (
            series is not None
            and series.name is not None
            and now - series.last_observed <= SERIES_WINDOW_SECONDS
        ):
            series.count += 1
            series.last_observed = now
            if now - series.sent_at >= SERIES_PATCH_SECONDS and self._take(obj, now):
                series.sent_at = now
                return Decision("patch", note, combined, series)
            return Decision("count", note, combined, series)
        if series is not None and series.name is None:
            # Its first post is still on its way: a repeat meanwhile is counted into it.
            series.count += 1
            series.last_observed = now
            return Decision("count", note, combined, series)
        if not self._take(obj, now):
            return Decision("drop", note, combined)
        series = Series(key=key, count=1, last_observed=now, sent_at=now)
        self._series.put(key, series)
        return Decision("post", note, combined, series)

    def posted(self, series: Series, name: str) -> None:
        """The Event of ``series`` exists under ``name``: repeats now count into it."""
        series.name = name

    def renew(self, series: Series) -> Series:
        """The Event of ``series`` is gone (expired, deleted): a fresh series to post it anew."""
        now = self._clock()
        fresh = Series(key=series.key, count=1, last_observed=now, sent_at=now)
        self._series.put(series.key, fresh)
        return fresh

    def forget(self, series: Series) -> None:
        """The Event of ``series`` was not posted, or is gone: the next one is posted anew."""
        if self._series.get(series.key) is series:
            self._series.pop(series.key)

    def _take(self, obj: Key, now: float) -> bool:
        """A token from the object's bucket, if one is left (refilled 1 per ``refill_seconds``)."""
        bucket = self._buckets.get(obj)
        if bucket is None:
            bucket = _Bucket(tokens=float(self._burst), at=now)
        else:
            elapsed = max(0.0, now - bucket.at)
            bucket.tokens = min(float(self._burst), bucket.tokens + elapsed / self._refill_seconds)
            bucket.at = now
        self._buckets.put(obj, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _aggregate(self, group: Key, note: str, now: float) -> bool:
        """Whether ``note`` is the 10th (or later) different note of ``group`` within the window."""
        seen = self._notes.get(group)
        if seen is None or now - seen.last > AGGREGATE_WINDOW_SECONDS:
            seen = _Notes(notes=set(), last=now)
        seen.notes.add(note)
        seen.last = now
        self._notes.put(group, seen)
        if len(seen.notes) < AGGREGATE_NOTES:
            return False
        seen.notes.pop()  # as client-go: the set never grows beyond the threshold
        return True

    def sizes(self) -> tuple[int, int, int]:
        """Entries held: rate-limit buckets, aggregation groups, series (for tests)."""
        return len(self._buckets), len(self._notes), len(self._series)
