"""Why a SecretSync or an identity is not Ready: the one type status, Events and retries read.

A ``Problem`` is raised where the failure is found (a guard, the identity registry, the writes,
rendering) or made from a service/Kubernetes error (``outcomes``), and read in one place: the pass
(sync.py) turns ``reason``/``message`` into the Ready condition and its Event, and ``retriable``/
``retry_after`` into the next try:

- ``retriable``: the same pass may succeed later with nothing changed (a server down, a Secret
  that may appear, an opt-in that may be added): back off and try again (``backoff.Backoff``);
- not retriable: only a change fixes it (the spec, the identity, the target): no timer of its own;
  the watch event of that change, or the scope's periodic refresh, brings the next look;
- ``retry_after``: at least this long before the next try (a server's Retry-After).

Why one type: four ad-hoc (reason, message) shapes used to exist side by side, and each place that
read them decided retries its own way.

Messages name keys, scopes, objects and request ids; never a value.
"""

from __future__ import annotations

# How much of a message a log line or an Event note carries: an Event's note holds 1 KiB, and a
# message can quote third-party text (an admission webhook's refusal) of any length.
NOTE_MAX_CHARS = 1024


class Problem(Exception):
    """A condition reason (``reasons``), a message for the user, and whether to try again."""

    def __init__(
        self, reason: str, message: str, *, retriable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retriable = retriable
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"Problem({self.reason!r}, {self.message!r}, retriable={self.retriable})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.reason, self.message, self.retriable, self.retry_after) == (
            other.reason,
            other.message,
            other.retriable,
            other.retry_after,
        )

    def __hash__(self) -> int:
        return hash((self.reason, self.message, self.retriable, self.retry_after))
