"""The ``secretferry`` command: help, version, exit codes, ``crds``, and what each command imports.

Cases about imports run in a fresh interpreter: what matters is which modules a process loads, and
this test session has kopf and the dev server loaded already. The rest call ``cli.main`` in process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import secretferry
from secretferry import cli, crdgen
from secretferry import settings as settings_mod

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
CRD_NAMES = [
    "secretsyncs.secretferry.io",
    "machineidentities.secretferry.io",
    "clustermachineidentities.secretferry.io",
    "clustersecretsyncs.secretferry.io",
    "passwordgenerators.secretferry.io",
    "uuidgenerators.secretferry.io",
    "dynamicsecretleases.secretferry.io",
    "pushsecrets.secretferry.io",
    "temporaryprivileges.secretferry.io",
]
COMMANDS = ["run", "crds", "dev-server", "settings-reference", "template"]

# The dev server's web stack and packages the operator does not use: none belongs in its process.
NOT_IN_THE_OPERATOR = [
    "fastapi",
    "starlette",
    "sse_starlette",
    "uvicorn",
    "kubernetes",
    "kubernetes_asyncio",  # ~1,170 modules, ~59 MiB: kube/ reads kubeconfigs itself
    "pykube",
    "rich",  # through httpx's command-line client, present in a dev venv
    "httpx_sse",
    "cryptography",
    "secretferry.devserver",
    "secretferry.devcluster",
]
# What the operator needs and nothing short of ``run`` should pay for.
THE_OPERATOR = ["kopf", "aiohttp", "httpx", "secretferry.handlers", "secretferry.reconcile"]


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False, timeout=60)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- help, version, exit codes --------------------------------------------------------------


def test_root_help_names_every_visible_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--help")
    assert (code, err) == (0, "")
    assert out.startswith("Usage: secretferry [OPTIONS] COMMAND [ARGS]...")
    commands = out.split("Commands:", 1)[1].split()
    assert {"run", "crds", "dev-server"} <= set(commands)
    assert "settings-reference" not in commands  # a maintainer's generator, hidden


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_exits_0_and_says_what_it_does(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, err = _run(capsys, command, "--help")
    assert (code, err) == (0, "")
    usage = out.lower().splitlines()[0]  # argparse (dev-server) writes "usage:", click "Usage:"
    assert usage.startswith(f"usage: secretferry {command}")
    assert len(out.splitlines()) > 3, out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "--version") == (0, f"secretferry {secretferry.__version__}\n", "")


def test_python_dash_m_is_the_same_command() -> None:
    proc = _python("-m", "secretferry", "--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"secretferry {secretferry.__version__}\n", "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-command"], "No such command 'no-such-command'"),
        (["crds", "--no-such-option"], "No such option '--no-such-option'"),
        (["crds", "extra-argument"], "Got unexpected extra argument"),
        (["run", "extra-argument"], "Got unexpected extra argument"),
        (["crds", "--check"], "--check compares files"),
        (["dev-server", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = _run(capsys, *args)
    assert (code, out) == (2, "")
    assert message in err


def test_no_command_shows_the_help_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys)
    assert code == 2
    assert "Commands:" in out + err


# --- run --help: the settings reference -------------------------------------------------------


def test_run_help_lists_every_setting_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "run", "--help")
    assert code == 0
    flat = " ".join(out.split())  # the help is wrapped to the terminal
    for name, field in settings_mod.Settings.model_fields.items():
        assert f"SECRETFERRY_{name.upper()} " in flat, name
        first_words = " ".join(str(field.description).replace("`", "").split()[:3])
        assert first_words in flat, name
    assert "SECRETFERRY_WORKERS" in flat and "default: 32]" in flat
    assert "HTTPS_PROXY" in flat


def test_the_hidden_generator_prints_docs_settings_md(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "settings-reference")
    assert code == 0
    assert out.startswith("# Settings\n")
    assert "`SECRETFERRY_PEERING`" in out


# --- crds ---------------------------------------------------------------------------------------


def test_crds_print_one_yaml_stream_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "crds")
    assert (code, err) == (0, "")
    docs = list(yaml.safe_load_all(out))
    assert [d["metadata"]["name"] for d in docs] == CRD_NAMES
    assert docs == crdgen.build_crds()


def test_crds_output_dir_writes_the_committed_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What ``make crds`` runs: the files must come out byte for byte as committed in crds/."""
    out_dir = tmp_path / "made" / "crds"
    code, out, _ = _run(capsys, "crds", "-o", str(out_dir))
    assert code == 0
    assert out.splitlines() == [str(out_dir / f"{name}.yaml") for name in CRD_NAMES]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    for path in out_dir.iterdir():
        assert path.read_bytes() == (CRD_DIR / path.name).read_bytes(), f"{path.name}; run make crds"
    # stdout carries the same documents as the files, in the same order.
    assert _run(capsys, "crds")[1] == "---\n".join(
        (out_dir / f"{name}.yaml").read_text(encoding="utf-8") for name in CRD_NAMES
    )


def test_crds_check_reports_drift_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert _run(capsys, "crds", "--output-dir", str(tmp_path), "--check")[0] == 1
    assert list(tmp_path.iterdir()) == []
    assert _run(capsys, "crds", "--output-dir", str(tmp_path))[0] == 0
    assert _run(capsys, "crds", "--output-dir", str(tmp_path), "--check") == (0, "", "")
    edited = tmp_path / f"{CRD_NAMES[1]}.yaml"
    edited.write_text("edited", encoding="utf-8")
    assert _run(capsys, "crds", "-o", str(tmp_path), "--check") == (1, "", f"stale: {edited}\n")


# --- what each command imports ------------------------------------------------------------------


def test_crds_and_help_do_not_load_the_operator() -> None:
    proc = _python(
        "-c",
        "import contextlib, io, json, sys\n"
        "from secretferry import cli\n"
        "codes = []\n"
        "for args in (['--help'], ['--version'], ['crds'], ['crds', '--help'], ['run', '--help'],"
        " ['settings-reference'], ['template', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        codes.append(cli.main(args))\n"
        f"loaded = [m for m in {THE_OPERATOR!r} if m in sys.modules]\n"
        "print(json.dumps([codes, loaded]))",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [[0] * 7, []]


def test_the_operator_process_loads_neither_the_dev_server_nor_unused_packages() -> None:
    proc = _python(
        "-c",
        "import json, sys\n"
        "from secretferry import runtime\n"
        "runtime.load_operator()\n"
        f"print(json.dumps([m for m in {NOT_IN_THE_OPERATOR!r} if sys.modules.get(m) is not None]))",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


# --- dev-server without its extra ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "named"),
    [
        ("uvicorn", "uvicorn is not installed"),
        ("fastapi", "fastapi is not installed"),
        ("sse_starlette", "sse_starlette is not installed"),
        ("secretferry.devserver", "this installation has no dev server"),  # the operator image
    ],
)
def test_dev_server_without_the_extra_says_how_to_get_it(hidden: str, named: str) -> None:
    # None in sys.modules makes `import <hidden>` fail as if the package were not installed.
    proc = _python(
        "-c",
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "from secretferry import cli\n"
        "sys.exit(cli.main(['dev-server', '--port', '0']))",
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"secretferry dev-server: {named}; get it with: pip install 'secretferry[devserver]'"
    ]


def test_dev_server_help_without_the_extra_still_describes_it() -> None:
    proc = _python(
        "-c",
        "import sys; sys.modules['secretferry.devserver'] = None\n"
        "from secretferry import cli\n"
        "sys.exit(cli.main(['dev-server', '--help']))",
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith("Usage: secretferry dev-server ")
    assert "pip install 'secretferry[devserver]'" in proc.stdout


def test_a_missing_module_of_our_own_is_not_blamed_on_the_extra() -> None:
    proc = _python(
        "-c",
        "import sys; sys.modules['secretferry.devserver.seed'] = None\n"
        "from secretferry import cli\n"
        "sys.exit(cli.main(['dev-server']))",
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    assert "pip install" not in proc.stderr
