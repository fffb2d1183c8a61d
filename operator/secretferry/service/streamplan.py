"""Which event streams to open for one (identity, project), and which scopes an event nudges (pure).

The service's limits shape everything here (docs/service-contract.md): a stream carries 1 to 10
``register`` items, each item is ONE event kind with an (environment, path) condition, and at
most 5 streams may be open per (project, identity).

Servers disagree on what the path condition means. The old and middle generations match it as a
glob (``"/p/**"`` = the subtree, ``"/p"`` = that folder only); the newest tests
``secretPath.startswith(condition)``, so ``"/p/**"`` matches nothing there and ``"/p"`` matches the
subtree (and siblings such as ``"/pq"``). We cannot tell the generation before the first event, so a
filter registers the patterns that serve it on both: an exact folder ``"/p"`` (a glob match, and a
superset under ``startswith``); a subtree both ``"/p/**"`` (globs) and ``"/p"`` (``startswith``) —
on each server one of the two is a subset of the other, so nothing arrives twice. A filter
therefore costs one item per event kind and pattern: 3 or 4 for a folder (``secret:import-mutation``
only for filters that serve a scope with ``include_imports``), 6 or 8 for a subtree. Over-delivery
(siblings, merged filters) is filtered out client-side by ``route``; it costs bytes, never nudges.

The alternative Infisical's own clients use (one registration per environment, no path condition,
filtered client-side) is what step 2 below falls back to for an environment; it costs the same 8
items per environment and delivers every change in it. ``bench/bench_streams.py`` prints both.

Planning, deterministic so that an unchanged set of scopes gives an unchanged plan:

1. each scope gives a filter ``(environment, path)`` or ``(environment, path/**)`` when recursive;
   filters inside another recursive filter are dropped;
2. the fewest streams that can serve the scopes is found by merging each environment down to one
   filter (the longest common path prefix + ``/**``); environments never merge. If even that needs
   more than ``max_streams`` streams, the environments with the most scopes get ``max_streams - 1``
   streams and the last is a project-wide catch-all (no condition) for the others;
3. with that number of streams fixed, filters are merged only as far as needed to fit, deepest
   common prefix first, so that as little as possible is over-delivered.

Merged filters over-deliver, so ``route`` filters events client-side against the scopes.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable, Collection, Iterable, Sequence

from secretferry.service import events as stream_events
from secretferry.service import scopes

DEFAULT_EVENTS = (
    stream_events.SECRET_CREATE,
    stream_events.SECRET_UPDATE,
    stream_events.SECRET_DELETE,
    stream_events.SECRET_IMPORT_MUTATION,
)
# docs/service-contract.md: ``register`` has 1 to 10 items; more than 5 open streams per (project,
# identity) are refused with 429.
MAX_REGISTRATIONS = 10
MAX_STREAMS = 5


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class Filter:
    """One (environment, path glob) condition; ``parts`` are the path's folders."""

    environment: str
    parts: tuple[str, ...]
    recursive: bool

    @classmethod
    def of(cls, scope: scopes.Scope) -> Filter:
        return cls(scope.environment, scopes.path_parts(scope.path), scope.recursive)

    @property
    def pattern(self) -> str:
        """The glob form: ``"/p"`` or ``"/p/**"``."""
        path = "/" + "/".join(self.parts)
        if not self.recursive:
            return path
        return "/**" if not self.parts else path + "/**"

    @property
    def patterns(self) -> tuple[str, ...]:
        """What to register so that glob and ``startswith`` servers both deliver (module docstring)."""
        if not self.recursive:
            return (self.pattern,)
        return (self.pattern, "/" + "/".join(self.parts))

    def contains(self, other: Filter) -> bool:
        if self.environment != other.environment:
            return False
        if self.recursive:
            return other.parts[: len(self.parts)] == self.parts
        return not other.recursive and other.parts == self.parts


@dataclasses.dataclass(frozen=True)
class Plan:
    """``streams[i]`` are the registrations of stream i; ``covered`` maps a scope to its stream."""

    streams: list[list[stream_events.EventRegistration]]
    covered: dict[scopes.Scope, int]
    uncovered: set[scopes.Scope]
    filters: list[list[Filter]] = dataclasses.field(default_factory=list)

    def scopes_of(self, index: int) -> set[scopes.Scope]:
        return {scope for scope, stream in self.covered.items() if stream == index}


def plan_registrations(
    scope_set: Collection[scopes.Scope],
    *,
    max_registrations: int = MAX_REGISTRATIONS,
    max_streams: int = MAX_STREAMS,
    events: Sequence[str] = DEFAULT_EVENTS,
) -> Plan:
    """Plan the streams of ONE (identity, project); see the module docstring."""
    kinds = tuple(dict.fromkeys(events))
    if not kinds or 2 * len(kinds) > max_registrations:
        raise ValueError("need 1 to max_registrations / 2 event kinds (a subtree costs two per kind)")

    def cost(flt: Filter, imports: bool) -> int:
        return len(_kinds_for(kinds, imports)) * len(flt.patterns)

    base: dict[Filter, bool] = {}
    for scope in scope_set:
        if not _kinds_for(kinds, scope.include_imports):
            continue  # no subscribed kind can concern it
        flt = Filter.of(scope)
        base[flt] = base.get(flt, False) or scope.include_imports
    base = _drop_contained(base)

    by_env: dict[str, dict[Filter, bool]] = collections.defaultdict(dict)
    for flt, imports in base.items():
        by_env[flt.environment][flt] = imports
    scope_count = collections.Counter(scope.environment for scope in scope_set)

    # The fewest streams possible: each environment merged to a single filter. When not every
    # environment fits, the last stream is a project-wide catch-all for the others (step 2).
    merged = {env: _merge_all(filters) for env, filters in by_env.items()}
    everything: dict[Filter, bool] = {flt: i for env in merged for flt, i in merged[env].items()}
    all_fit = _pack(everything, cost, max_registrations, max_streams) is not None
    env_streams = max_streams if all_fit else max(0, max_streams - 1)
    chosen: dict[Filter, bool] = {}
    for env in sorted(by_env, key=lambda env: (-scope_count[env], env)):
        trial = dict(chosen)
        trial.update(merged[env])
        if _pack(trial, cost, max_registrations, env_streams) is not None:
            chosen = trial
    covered_envs = {flt.environment for flt in chosen}
    bins = _pack(chosen, cost, max_registrations, env_streams)
    stream_count = len(bins) if bins else 0

    # As precise as that number of streams allows.
    filters = {flt: imports for flt, imports in base.items() if flt.environment in covered_envs}
    packed = _pack(filters, cost, max_registrations, stream_count)
    while packed is None:
        filters = _merge_deepest(filters)
        packed = _pack(filters, cost, max_registrations, stream_count)

    streams = [
        [
            stream_events.EventRegistration(event=kind, environment_slug=flt.environment, secret_path=pattern)
            for flt in group
            for pattern in flt.patterns
            for kind in _kinds_for(kinds, filters[flt])
        ]
        for group in packed
    ]
    owner = {flt: index for index, group in enumerate(packed) for flt in group}
    covered: dict[scopes.Scope, int] = {}
    uncovered: set[scopes.Scope] = set()
    for scope in scope_set:
        index = _owner_of(Filter.of(scope), owner) if _kinds_for(kinds, scope.include_imports) else None
        if index is None:
            uncovered.add(scope)
        else:
            covered[scope] = index
    if uncovered and not all_fit and max_streams > 0:
        # Catch-all: one item per kind with no condition — every change in the project, filtered
        # client-side. Needs the Secret Events permission project-wide (else the service answers
        # 403 and these scopes poll), and the oldest servers require conditions (422, they poll).
        imports = any(scope.include_imports for scope in uncovered)
        streams.append([stream_events.EventRegistration(event=kind) for kind in _kinds_for(kinds, imports)])
        packed.append([])
        for scope in uncovered:
            covered[scope] = len(streams) - 1
        uncovered = set()
    return Plan(streams=streams, covered=covered, uncovered=uncovered, filters=packed)


def route(event: stream_events.SecretEvent, scope_set: Iterable[scopes.Scope]) -> set[scopes.Scope]:
    """Scopes of one project that ``event`` may have changed (merged filters over-deliver).

    Import mutations also nudge every scope that includes imports: we cannot tell which importing
    scope the service meant, and a conditional list answers 304 when nothing changed. An event
    without a usable location nudges every scope (it is rare and a 304 is cheap).
    """
    candidates = list(scope_set)
    if not event.items:
        return set(candidates)
    hit: set[scopes.Scope] = set()
    for item in event.items:
        hit |= scopes.covering(candidates, item.environment, item.secret_path)
    if event.event_type == stream_events.SECRET_IMPORT_MUTATION:
        hit |= {scope for scope in candidates if scope.include_imports}
    return hit


# --- internals ---------------------------------------------------------------------------------------


def _kinds_for(kinds: tuple[str, ...], imports: bool) -> tuple[str, ...]:
    return tuple(kind for kind in kinds if imports or kind != stream_events.SECRET_IMPORT_MUTATION)


def _drop_contained(filters: dict[Filter, bool]) -> dict[Filter, bool]:
    """Remove filters inside another recursive filter (their imports flag moves to the container)."""
    recursive = {(flt.environment, flt.parts) for flt in filters if flt.recursive}
    out: dict[Filter, bool] = {}
    moved: dict[Filter, bool] = {}
    for flt, imports in filters.items():
        container = _container(flt, recursive)
        if container is None:
            out[flt] = out.get(flt, False) or imports
        else:
            moved[container] = moved.get(container, False) or imports
    for flt, imports in moved.items():
        out[flt] = out.get(flt, False) or imports
    return out


def _container(flt: Filter, recursive: set[tuple[str, tuple[str, ...]]]) -> Filter | None:
    """The outermost recursive filter strictly containing ``flt``, if any."""
    # "/a/**" contains the exact "/a" but not itself: a recursive filter needs a shorter prefix.
    deepest = len(flt.parts) - 1 if flt.recursive else len(flt.parts)
    for depth in range(deepest + 1):
        if (flt.environment, flt.parts[:depth]) in recursive:
            return Filter(flt.environment, flt.parts[:depth], True)
    return None


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return a[:n]


def _merge_all(filters: dict[Filter, bool]) -> dict[Filter, bool]:
    """One environment's filters as one filter."""
    if len(filters) == 1:
        return dict(filters)
    items = sorted(filters)
    prefix = items[0].parts
    for flt in items[1:]:
        prefix = _common_prefix(prefix, flt.parts)
    return {Filter(items[0].environment, prefix, True): any(filters.values())}


def _merge_deepest(filters: dict[Filter, bool]) -> dict[Filter, bool]:
    """Merge the filters under the deepest common prefix of any two filters of one environment.

    In sorted order the deepest common prefix of any pair is found among neighbours.
    """
    best: tuple[int, Filter] | None = None
    ordered = sorted(filters)
    for left, right in itertools.pairwise(ordered):
        if left.environment != right.environment:
            continue
        prefix = _common_prefix(left.parts, right.parts)
        candidate = Filter(left.environment, prefix, True)
        if best is None or len(prefix) > best[0]:
            best = (len(prefix), candidate)
    if best is None:
        raise AssertionError("nothing left to merge")  # the per-environment plan always fits
    merged = best[1]
    out = {flt: imports for flt, imports in filters.items() if not merged.contains(flt)}
    out[merged] = any(imports for flt, imports in filters.items() if merged.contains(flt))
    return out


def _pack(
    filters: dict[Filter, bool],
    cost: Callable[[Filter, bool], int],
    capacity: int,
    max_bins: int,
) -> list[list[Filter]] | None:
    """First-fit decreasing into at most ``max_bins`` streams; ``None`` when it does not fit."""
    bins: list[list[Filter]] = []
    room: list[int] = []
    for flt in sorted(filters, key=lambda flt: (-cost(flt, filters[flt]), flt)):
        need = cost(flt, filters[flt])
        for index, free in enumerate(room):
            if free >= need:
                bins[index].append(flt)
                room[index] -= need
                break
        else:
            if len(bins) == max_bins:
                return None
            bins.append([flt])
            room.append(capacity - need)
    return [sorted(group) for group in bins]


def _owner_of(flt: Filter, owner: dict[Filter, int]) -> int | None:
    for candidate, index in owner.items():
        if candidate.contains(flt):
            return index
    return None
