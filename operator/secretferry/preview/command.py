"""One run of ``secretferry template``: the inputs read, the render, the refusal as status shows it.

The click command (``secretferry.cli``) only parses flags and prints; this is what it runs, so
that a run can be tested without a terminal and the CLI module stays free of the operator's
imports until the command is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from secretferry import settings as settings_mod
from secretferry.kube import client
from secretferry.kube import errors as kube_errors
from secretferry.kubectl import connection
from secretferry.models import secretsync
from secretferry.preview import inputs, render
from secretferry.reconcile import conditions, desired, problems, reasons


class Refused(Exception):
    """What the operator would show in the Ready condition: its reason and message, as stored."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True, kw_only=True)
class Request:
    """The command's flags."""

    filename: Path | None = None
    live: str | None = None
    value_files: Sequence[Path] = ()
    sets: Sequence[str] = ()
    source_files: Sequence[Path] = ()
    namespace: str | None = None
    kubeconfig: str | None = None
    context: str | None = None


async def run(request: Request, *, settings: settings_mod.Settings) -> desired.DesiredObject:
    """The rendered target; raises :class:`Refused` (exit 1) or ``inputs.InputError`` (exit 2)."""
    values = inputs.load_values(inputs.read_files(list(request.value_files)), list(request.sets))
    kube: client.Kube | None = None
    try:
        try:
            if request.live is not None:
                kube, sync = await _live(request, request.live)
            else:
                assert request.filename is not None
                ((source, text),) = inputs.read_files([request.filename])
                sync = inputs.load_sync(text, source=source, namespace=request.namespace)
            reader: inputs.FileSources | inputs.LiveSources
            if request.source_files or kube is None:
                files = inputs.read_files(list(request.source_files))
                reader = inputs.FileSources(files, namespace=sync.metadata.namespace or "default")
            else:
                reader = inputs.LiveSources(kube)
            return await render.render(sync, values, reader=reader, settings=settings)
        except problems.Problem as problem:
            raise _refused(problem) from None
    finally:
        if kube is not None:
            await kube.close()


async def _live(request: Request, live: str) -> tuple[client.Kube, secretsync.SecretSync]:
    namespace, sep, name = live.partition("/")
    if not sep or not namespace or not name:
        raise inputs.InputError(f"--live {live!r}: expected NAMESPACE/NAME")
    try:
        kube = await connection.connect(request.kubeconfig, context=request.context)
    except kube_errors.KubeError as exc:
        raise inputs.InputError(exc.message) from None
    try:
        return kube, await inputs.fetch_sync(kube, namespace=namespace, name=name)
    except BaseException:
        await kube.close()
        raise


def _refused(problem: problems.Problem) -> Refused:
    """As the Ready condition would hold it (escaped, cut to its limit): the operator's helper."""
    written = conditions.set_condition(
        [],
        type_=reasons.READY,
        status="False",
        reason=problem.reason,
        message=problem.message,
        observed_generation=None,
        now=conditions.now(),
    )
    # Ready, and Stalled beside it for a reason only a change fixes: Ready is what the user reads.
    (shown,) = [c for c in written if c.type == reasons.READY]
    return Refused(shown.reason, shown.message)
