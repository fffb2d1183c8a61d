"""The ``secretferry`` command: ``run`` (the operator), ``dev-server`` (reference service), ``crds``
(the CRDs as YAML), ``convert`` (Infisical operator manifests to ours), ``template`` (a SecretSync
rendered against sample values: :mod:`secretferry.preview`) and ``settings-reference``.

Sub-commands import their modules only when they run, so that ``secretferry crds`` and every
``--help`` stay free of kopf, and the operator never loads the dev server. ``run --help`` reads the
settings model when it is asked for (:mod:`secretferry.settings_reference`), not on every start.

The dev server and its web stack are an extra (``secretferry[devserver]``) that the operator image
leaves out, so ``dev-server`` says how to get them instead of failing with a traceback. Its flags
belong to its own parser (:mod:`secretferry.devserver.cli`, which needs the extra), so
``dev-server`` passes every argument through, ``--help`` included.

Exit status: 0 on success, 1 on failure (a ``crds --check`` that finds drift, a missing extra),
2 on a usage error (click's convention, and argparse's in the dev server).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import click

import secretferry

# What ``dev-server`` needs beyond the operator: the web stack of the ``devserver`` extra (starlette
# comes with fastapi and sse-starlette), and the dev server package itself, which the runtime image
# leaves out (a missing module *inside* it is a bug of ours, not a missing extra).
_WEB_STACK: Final = ("fastapi", "starlette", "sse_starlette", "uvicorn")
_DEVSERVER: Final = "secretferry.devserver"
_GET_THE_EXTRA: Final = "pip install 'secretferry[devserver]'"

_HELP_OPTIONS: Final = ("-h", "--help")
# 100 columns: the settings in ``run --help`` carry a sentence or two each; click's default (80)
# wraps them into long narrow columns. A narrower terminal still wins.
_CONTEXT: Final[dict[str, Any]] = {"help_option_names": list(_HELP_OPTIONS), "max_content_width": 100}


def _is_devserver_extra(missing: str | None) -> bool:
    """Whether a failed import is the dev server package or its web stack."""
    top = (missing or "").partition(".")[0]
    return missing == _DEVSERVER or top in _WEB_STACK


@click.group(context_settings=_CONTEXT)
@click.version_option(
    secretferry.__version__, "--version", prog_name="secretferry", message="%(prog)s %(version)s"
)
def command() -> None:
    """Keep Kubernetes Secrets in step with an Infisical-compatible secrets service."""


class _RunCommand(click.Command):
    """``run``'s help ends with every setting: variable, description, type and default."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from secretferry import settings_reference

        rows = [
            (e.env, f"{e.description.replace('`', '')} [{e.kind}; default: {e.shown_default}]")
            for e in settings_reference.entries()
        ]
        with formatter.section("Settings (environment variables, read once at start-up)"):
            formatter.write_dl(rows)
        formatter.write_paragraph()
        formatter.write_text(
            "HTTPS_PROXY, HTTP_PROXY and NO_PROXY apply to the secrets service only; the Kubernetes"
            " apiserver is always reached directly. docs/settings.md has the details."
        )
        super().format_epilog(ctx, formatter)


@command.command(cls=_RunCommand, short_help="Run the operator; --help lists its settings.")
@click.pass_context
def run(ctx: click.Context) -> None:
    """Run the operator, configured by the SECRETFERRY_* variables below.

    It serves SecretSync, MachineIdentity and ClusterMachineIdentity objects in the namespaces of
    SECRETFERRY_WATCH_NAMESPACES (all when empty), reaching the apiserver in-cluster or through a
    kubeconfig (SECRETFERRY_KUBECONFIG, else $KUBECONFIG).
    """
    from secretferry import runtime

    ctx.exit(runtime.main([]))


@command.command(
    "dev-server",
    context_settings={"ignore_unknown_options": True},
    add_help_option=False,  # the dev server's own parser answers --help with all its flags
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def dev_server(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Run the reference secrets service (needs the devserver extra).

    Its options are the dev server's own: `secretferry dev-server --help` lists them once the
    extra is installed (pip install 'secretferry[devserver]').
    """
    try:
        from secretferry.devserver import cli as devserver_cli
    except ModuleNotFoundError as exc:
        if not _is_devserver_extra(exc.name):
            raise
        if any(arg in _HELP_OPTIONS for arg in args):
            click.echo(ctx.get_help())  # what the command is, even where it cannot run
            ctx.exit(0)
        # The runtime image keeps the package but leaves the dev server out of it.
        what = f"{exc.name} is not installed"
        if exc.name == _DEVSERVER:
            what = "this installation has no dev server"
        click.echo(f"secretferry dev-server: {what}; get it with: {_GET_THE_EXTRA}", err=True)
        ctx.exit(1)
    ctx.exit(devserver_cli.main(list(args)))


@command.command(short_help="Print the CRDs as YAML, or write them into a directory.")
@click.option(
    "-o",
    "--output-dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write one file per CRD into DIR (created when missing) instead of stdout; `make crds` uses crds/.",
)
@click.option(
    "--check",
    is_flag=True,
    help="With -o: write nothing, exit 1 when a file in DIR is missing or differs.",
)
@click.pass_context
def crds(ctx: click.Context, output_dir: Path | None, check: bool) -> None:
    """Print the CustomResourceDefinitions, generated from the models, as one YAML stream.

    For example `secretferry crds | kubectl apply --server-side -f -`.
    """
    from secretferry import crdgen

    if output_dir is None:
        if check:
            raise click.UsageError("--check compares files: name their directory with -o/--output-dir")
        click.echo("---\n".join(crdgen.render(crd) for crd in crdgen.build_crds()), nl=False)
        return
    if check:
        stale = crdgen.stale_files(output_dir)
        for path in stale:
            click.echo(f"stale: {path}", err=True)
        ctx.exit(1 if stale else 0)
    for path in crdgen.write_crds(output_dir):
        click.echo(str(path))


@command.command(short_help="Print SecretSync/MachineIdentity YAML for Infisical operator manifests.")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    metavar="FILE",
    type=click.File("r", encoding="utf-8"),
    help="A YAML file of Infisical operator manifests (several documents, or a List); - for stdin."
    " Repeatable.",
)
@click.pass_context
def convert(ctx: click.Context, files: tuple[TextIO, ...]) -> None:
    """Convert Infisical operator manifests into SecretSync and MachineIdentity YAML.

    Reads InfisicalSecret (v1alpha1) and InfisicalStaticSecret, InfisicalAuth and
    InfisicalConnection (v1beta1); writes the equivalent objects to stdout and, to stderr, one
    `# not converted: <object>/<field>: <why>` line for each thing without an equivalent, then the
    commands to run by hand (opt-in annotations, handing existing Secrets over). It changes
    nothing and never reads a Secret. For example
    `kubectl get infisicalsecrets -A -o yaml | secretferry convert -f - > secretferry.yaml`.

    Exit status: 0 when everything was converted, 1 when something was not (what could be is
    still printed), 2 on a usage error or input that is not YAML.
    """
    from secretferry import convert as converter

    if not files:
        raise click.UsageError("name the manifests with -f FILE (-f - reads stdin)")
    objects = []
    for file in files:
        try:
            objects += converter.load_documents(file.read(), source=file.name)
        except UnicodeDecodeError:
            click.echo(f"secretferry convert: {file.name}: not UTF-8 text", err=True)
            ctx.exit(2)
        except converter.InputError as exc:
            click.echo(f"secretferry convert: {exc}", err=True)
            ctx.exit(2)
    result = converter.convert(objects)
    click.echo(converter.render(result), nl=False)
    for line in converter.messages(result):
        click.echo(line, err=True)
    ctx.exit(0 if result.complete else 1)


@command.command(short_help="Render a SecretSync against sample values, as the operator would.")
@click.option(
    "-f",
    "--filename",
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="The SecretSync (YAML or JSON; - for stdin).",
)
@click.option("--live", metavar="NAMESPACE/NAME", help="Read the SecretSync from the cluster instead.")
@click.option(
    "--values",
    "value_files",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Sample values: a YAML or JSON mapping, or dotenv lines. Repeatable; later files win.",
)
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="A sample value. Repeatable; wins over files."
)
@click.option(
    "--template-source",
    "source_files",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="ConfigMaps/Secrets that templateFrom names. Repeatable. Without it, --live reads them"
    " from the cluster.",
)
@click.option(
    "-n", "--namespace", help="The SecretSync's namespace when its file names none (default: default)."
)
@click.option(
    "--kubeconfig", metavar="PATH", help="For --live: this kubeconfig, not $KUBECONFIG or ~/.kube/config."
)
@click.option("--context", metavar="NAME", help="For --live: this kubeconfig context.")
@click.option("--show-values", is_flag=True, help="Print the values instead of <redacted N bytes>.")
@click.pass_context
def template(
    ctx: click.Context,
    filename: Path | None,
    live: str | None,
    value_files: tuple[Path, ...],
    sets: tuple[str, ...],
    source_files: tuple[Path, ...],
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    show_values: bool,
) -> None:
    """Render a SecretSync's target against sample values, in the operator's sandbox and limits.

    The sample values stand for what every source lists at the service; includeKeys/excludeKeys,
    rewrite, decoding, templates (inline and templateFrom) and the key, type and size checks then
    run as in the operator, with the limits of the SECRETFERRY_TEMPLATE_* variables. Prints the
    Secret (or ConfigMap) as YAML, each value shown as <redacted N bytes> unless --show-values;
    or, to stderr, the reason and message the SecretSync's Ready condition would show.

    For example `secretferry template -f sync.yaml --values dev.env --set DB_PORT=5432`, or
    `secretferry template --live team-a/db --values sample.yaml`.

    Exit status: 0 rendered, 1 the operator would refuse (reason printed), 2 a usage error or an
    input that cannot be read.
    """
    import asyncio

    import pydantic

    from secretferry import preview
    from secretferry import settings as settings_mod
    from secretferry.preview import command as preview_command
    from secretferry.preview import output

    if (filename is None) == (live is None):
        raise click.UsageError("name the SecretSync with -f FILE or --live NAMESPACE/NAME (one of them)")
    try:
        settings = settings_mod.Settings()
    except pydantic.ValidationError as exc:
        # Named by variable and rule, never by value (a setting may hold a credential).
        found = "; ".join(
            f"{'SECRETFERRY_' + str(e['loc'][0]).upper() if e['loc'] else 'settings'}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
        click.echo(f"secretferry template: the SECRETFERRY_* settings are invalid: {found}", err=True)
        ctx.exit(2)
    request = preview_command.Request(
        filename=filename,
        live=live,
        value_files=value_files,
        sets=sets,
        source_files=source_files,
        namespace=namespace,
        kubeconfig=kubeconfig,
        context=context,
    )
    try:
        want = asyncio.run(preview_command.run(request, settings=settings))
    except preview.InputError as exc:
        click.echo(f"secretferry template: {exc}", err=True)
        ctx.exit(2)
    except preview_command.Refused as refused:
        click.echo(f"{refused.reason}: {refused.message}", err=True)
        ctx.exit(1)
    click.echo(output.render(want, show_values=show_values), nl=False)


@command.command("settings-reference", hidden=True)
def settings_reference() -> None:
    """Print docs/settings.md, generated from the Settings model."""
    from secretferry import settings_reference as reference

    click.echo(reference.markdown(), nl=False)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit status rather than raising SystemExit (tests call it)."""
    try:
        command.main(args=None if argv is None else list(argv), prog_name="secretferry")
    except SystemExit as exc:
        return _status(exc.code)
    return 0  # click's standalone mode always exits; this is for type checkers


def _status(code: str | int | None) -> int:
    """What the interpreter makes of ``sys.exit(code)``: a message is printed and means failure."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
