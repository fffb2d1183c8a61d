"""``kubectl-secretferry``: the kubectl plugin (``kubectl secretferry status|why|sync``).

Installed with the package as a console script of that name, so ``kubectl secretferry ...``
finds it on PATH (kubectl runs any ``kubectl-<name>`` executable as ``kubectl <name>``).

    status [-n NS | -A]          one table of every SecretSync: Ready, reason, update mode,
                                 identity, last sync, target; with -A a second table of every
                                 ClusterSecretSync (cluster-scoped), alone with --cluster
    why NAME [-n NS]             the Ready message, the update mode and why, each source's scope
                                 with its last list and its stream (from the identity's status),
                                 the identity's state, recent Events
    why clustersecretsync/NAME   (or why --cluster NAME) its namespace counts, the failing
                                 namespaces with their reasons, the identity, its Events
    sync NAME... | --identity X  set secretferry.io/force-sync on each (in bulk with --identity)

It works with the user's kubeconfig and RBAC only (connection.py) and never talks to the
operator: what it shows is what status and Events say. A read the user may not make is reported
(``cannot get ClusterMachineIdentity x: forbidden``) and the rest is still shown; the exit
status is then 1. It never reads a Secret, so it can print no value.

Exit status: 0 when everything was read (or written), 1 when something was refused or missing,
2 on a usage error.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import click

import secretferry
from secretferry.kube import client
from secretferry.kube import errors as kube_errors
from secretferry.kubectl import clusterviews, connection, reads, views
from secretferry.models import labels

FORCE_SYNC_ANNOTATION: Final = labels.FORCE_SYNC_ANNOTATION
_CONTEXT: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

T = TypeVar("T")


@click.group(context_settings=_CONTEXT)
@click.version_option(
    secretferry.__version__, "--version", prog_name="kubectl-secretferry", message="%(prog)s %(version)s"
)
def command() -> None:
    """Inspect and nudge secretferry's SecretSyncs with your own kubeconfig and RBAC."""


def _connection_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--context", metavar="NAME", help="The kubeconfig context to use.")(func)
    func = click.option(
        "--kubeconfig", metavar="PATH", help="The kubeconfig to use (default: $KUBECONFIG, ~/.kube/config)."
    )(func)
    func = click.option("-n", "--namespace", help="Namespace (default: the context's, else default).")(func)
    return func


def _run(
    ctx: click.Context,
    kubeconfig: str | None,
    context: str | None,
    work: Callable[[client.Kube], Awaitable[int]],
) -> None:
    async def main() -> int:
        try:
            kube = await connection.connect(kubeconfig, context=context)
        except kube_errors.KubeError as exc:
            click.echo(f"kubectl-secretferry: {exc.message}", err=True)
            return 1
        try:
            return await work(kube)
        except kube_errors.Unavailable as exc:
            click.echo(f"kubectl-secretferry: the apiserver cannot be reached: {exc.message}", err=True)
            return 1
        finally:
            await kube.close()

    ctx.exit(asyncio.run(main()))


@command.command(short_help="One table of every SecretSync: reason, update mode, identity, last sync.")
@_connection_options
@click.option(
    "-A", "--all-namespaces", is_flag=True, help="SecretSyncs of every namespace, then ClusterSecretSyncs."
)
@click.option("--cluster", is_flag=True, help="Only the ClusterSecretSyncs (cluster-scoped).")
@click.pass_context
def status(
    ctx: click.Context,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    all_namespaces: bool,
    cluster: bool,
) -> None:
    """One table of the SecretSyncs of a namespace (or of all with -A): Ready, its reason, the
    update mode (Streaming, Polling, OnChange, CreatedOnce), the identity, how long ago the last
    sync wrote, and the target. ClusterSecretSyncs are cluster-scoped: -A adds a second table of
    them (when there are any, and when the SecretSyncs of every namespace could be listed),
    --cluster shows that table alone. Its NAMESPACES column is ready/selected namespaces."""
    if cluster and namespace:
        raise click.UsageError("--cluster shows cluster-scoped ClusterSecretSyncs: no -n")
    if cluster:
        _run(ctx, kubeconfig, context, _cluster_status(required=True))
        return
    where = None if all_namespaces else namespace or connection.default_namespace(kubeconfig, context=context)
    with_cluster = _cluster_status(required=False)

    async def work(kube: client.Kube) -> int:
        listed, printed = await namespaced(kube)
        if where is not None or listed:
            # A refused -A says so once: who may not list every namespace's SecretSyncs may not
            # list cluster-scoped objects either (--cluster asks alone).
            return listed
        return await with_cluster(kube, blank_line=printed)

    async def namespaced(kube: client.Kube) -> tuple[int, bool]:
        """(exit status, whether a table was printed)."""
        syncs = await reads.list_syncs(kube, namespace=where)
        if isinstance(syncs, reads.Denied):
            click.echo(f"kubectl-secretferry: {syncs}", err=True)
            return 1, False
        if not syncs:
            click.echo(
                f"No SecretSyncs {'in any namespace' if where is None else f'in namespace {where}'}.",
                err=True,
            )
            return 0, False
        click.echo(views.status_table(syncs, all_namespaces=where is None), nl=False)
        return 0, True

    _run(ctx, kubeconfig, context, work)


def _cluster_status(*, required: bool) -> Callable[..., Awaitable[int]]:
    """The ClusterSecretSync table. ``required`` (``--cluster``): say so when there are none;
    else (after -A's SecretSyncs) print nothing then, and the table after a blank line."""

    async def work(kube: client.Kube, *, blank_line: bool = False) -> int:
        found = await reads.list_cluster_syncs(kube)
        if isinstance(found, reads.Denied):
            click.echo(f"kubectl-secretferry: {found}", err=True)
            return 1
        if not found:
            if required:
                click.echo("No ClusterSecretSyncs.", err=True)
            return 0
        if blank_line:
            click.echo()
        click.echo(clusterviews.cluster_table(found), nl=False)
        return 0

    return work


@command.command(short_help="Why a SecretSync is (not) Ready: message, update mode, identity, Events.")
@_connection_options
@click.argument("name")
@click.option("--events", "max_events", default=10, show_default=True, help="How many recent Events to show.")
@click.option("--cluster", is_flag=True, help="NAME is a ClusterSecretSync (as clustersecretsync/NAME).")
@click.pass_context
def why(
    ctx: click.Context,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    name: str,
    max_events: int,
    cluster: bool,
) -> None:
    """Everything status and Events say about one SecretSync: the Ready reason and message, the
    update mode and why (which stream serves it, or why it polls), each source's scope with when
    it was last listed and its project's stream (from the identity's status), when it last
    synced, the identity's Ready state, last login, list route and streams, and the recent Events
    about it. What your RBAC does not let you read is named, and the rest is shown.

    For a ClusterSecretSync (why clustersecretsync/NAME, or why --cluster NAME): how many
    namespaces it selects, holds and fails, the failing ones with their reasons and messages, its
    ClusterMachineIdentity and its Events (in namespace default)."""
    kind, _, name = name.rpartition("/")
    if kind.lower() in clusterviews.KINDS or cluster:
        if namespace:
            raise click.UsageError("a ClusterSecretSync is cluster-scoped: no -n")
        _run(ctx, kubeconfig, context, _why_cluster(name, max_events=max_events))
        return
    if kind.lower() not in clusterviews.SECRET_SYNC_KINDS:
        raise click.UsageError(f"why explains a secretsync/NAME or a clustersecretsync/NAME, not {kind}")
    where = namespace or connection.default_namespace(kubeconfig, context=context)

    async def work(kube: client.Kube) -> int:
        sync = await reads.get_sync(kube, namespace=where, name=name)
        if isinstance(sync, reads.Denied):
            click.echo(f"kubectl-secretferry: {sync}", err=True)
            return 1
        kind, identity_name = views.identity_of(sync)
        identity = await reads.get_identity(kube, kind=kind, namespace=where, name=identity_name)
        events = await reads.events_about(kube, namespace=where, kind="SecretSync", name=name)
        click.echo(views.explain(sync, identity, events, max_events=max_events), nl=False)
        return 1 if isinstance(identity, reads.Denied) or isinstance(events, reads.Denied) else 0

    _run(ctx, kubeconfig, context, work)


def _why_cluster(name: str, *, max_events: int) -> Callable[[client.Kube], Awaitable[int]]:
    async def work(kube: client.Kube) -> int:
        body = await reads.get_cluster_sync(kube, name=name)
        if isinstance(body, reads.Denied):
            click.echo(f"kubectl-secretferry: {body}", err=True)
            return 1
        _, identity_name = views.identity_of({"spec": (body.get("spec") or {}).get("syncTemplate") or {}})
        identity = await reads.get_identity(
            kube, kind="ClusterMachineIdentity", namespace="", name=identity_name
        )
        events = await reads.events_about(
            kube, namespace=reads.CLUSTER_EVENTS_NAMESPACE, kind="ClusterSecretSync", name=name
        )
        click.echo(clusterviews.explain_cluster(body, identity, events, max_events=max_events), nl=False)
        return 1 if isinstance(identity, reads.Denied) or isinstance(events, reads.Denied) else 0

    return work


@command.command(short_help="Force a sync now: by name, or every SecretSync of an identity.")
@_connection_options
@click.argument("names", nargs=-1)
@click.option(
    "--identity", metavar="[ClusterMachineIdentity/]NAME", help="Every SecretSync using this identity."
)
@click.option("-A", "--all-namespaces", is_flag=True, help="With --identity: in every namespace.")
@click.pass_context
def sync(
    ctx: click.Context,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    names: tuple[str, ...],
    identity: str | None,
    all_namespaces: bool,
) -> None:
    """Set secretferry.io/force-sync to the current time on SecretSyncs: the operator then reads
    the service and compares the target at once, whatever its refreshPolicy. Takes patch on
    secretsyncs; nothing else changes (spec is not touched)."""
    if bool(names) == bool(identity):
        raise click.UsageError("name SecretSyncs, or select them with --identity (one of them)")
    if all_namespaces and not identity:
        raise click.UsageError("-A selects by --identity in every namespace")
    where = None if all_namespaces else namespace or connection.default_namespace(kubeconfig, context=context)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    async def work(kube: client.Kube) -> int:
        targets: list[tuple[str, str]]
        if identity:
            listed = await reads.list_syncs(kube, namespace=where)
            if isinstance(listed, reads.Denied):
                click.echo(f"kubectl-secretferry: {listed}", err=True)
                return 1
            targets = [
                (str(b["metadata"]["namespace"]), str(b["metadata"]["name"]))
                for b in listed
                if _uses(b, identity)
            ]
            if not targets:
                click.echo(f"No SecretSync uses identity {identity}.", err=True)
                return 1
        else:
            assert where is not None
            targets = [(where, n) for n in names]
        failed = 0
        for ns, name in targets:
            refused = await reads.annotate(
                kube, namespace=ns, name=name, key=FORCE_SYNC_ANNOTATION, value=stamp
            )
            if refused is None:
                click.echo(f"secretsync {ns}/{name}: {FORCE_SYNC_ANNOTATION}={stamp}")
            else:
                failed += 1
                click.echo(f"kubectl-secretferry: {refused}", err=True)
        return 1 if failed else 0

    _run(ctx, kubeconfig, context, work)


def _uses(body: views.Body, identity: str) -> bool:
    """Whether a SecretSync names ``identity`` (``NAME`` is a MachineIdentity, as in identityRef)."""
    kind, _, name = identity.rpartition("/")
    return views.identity_of(body) == (kind or "MachineIdentity", name)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit status rather than raising SystemExit (tests call it)."""
    try:
        command.main(args=None if argv is None else list(argv), prog_name="kubectl-secretferry")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
