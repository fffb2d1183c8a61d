"""The ``secretferry`` command without the ``devserver`` extra, and what ``secretferry run`` loads.

Each case runs in a fresh interpreter: what matters is which modules a process imports, and this
test session has the dev server loaded already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )


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
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "from secretferry import cli\n"
        "sys.exit(cli.main(['dev-server', '--port', '0']))"
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"secretferry dev-server: {named}; get it with: pip install 'secretferry[devserver]'"
    ]


def test_a_missing_module_of_our_own_is_not_blamed_on_the_extra() -> None:
    proc = _python(
        "import sys; sys.modules['secretferry.devserver.seed'] = None\n"
        "from secretferry import cli\n"
        "sys.exit(cli.main(['dev-server']))"
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    assert "pip install" not in proc.stderr


def test_the_operator_process_loads_neither_the_dev_server_nor_unused_packages() -> None:
    proc = _python(
        "import json, sys\n"
        "from secretferry import runtime\n"
        "runtime.load_operator()\n"
        f"print(json.dumps([m for m in {NOT_IN_THE_OPERATOR!r} if sys.modules.get(m) is not None]))"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
