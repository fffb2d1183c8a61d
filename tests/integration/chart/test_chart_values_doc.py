"""The chart README's values table is generated (hack/gen-chart-values-doc.py) and must not drift."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from chart_helpers import CHART, ROOT

SCRIPT = ROOT / "hack" / "gen-chart-values-doc.py"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_chart_values_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def test_readme_values_table_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_every_value_has_a_row_with_its_schema_type(gen: ModuleType) -> None:
    readme = (CHART / "README.md").read_text()
    rows = gen.parse_rows((CHART / "values.yaml").read_text())
    paths = {".".join(r.path) for r in rows}
    for path in (
        "config.tokenRequestsEnabled",
        "rbac.aggregateToDefaultRoles",
        "networkPolicy.serviceHosts.cidrs",
    ):
        assert path in paths
        assert f"| `{path}` |" in readme
    assert '| `podDisruptionBudget.enabled` | "auto" \\| true \\| false | `"auto"` |' in readme
    # Documented as a whole: their keys get no rows of their own.
    assert "livenessProbe" in paths and "livenessProbe.enabled" not in paths
    assert "networkPolicy.dns.to" in paths and not any(p.startswith("networkPolicy.dns.to.") for p in paths)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "integer"}, "c": {"$ref": "#/definitions/s"}}},
        "d": {"type": "array"},
    },
    "definitions": {"s": {"type": "string"}},
}


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ("a:\n  # -- B.\n  b: 1\n  c: x\n", "a.c has no `# --` comment"),
        ("# -- D.\nd: []\n# -- E.\ne: 1\n", "no entry for e"),
        ("a:\n  # -- B.\n  b: 1\n  # -- C.\n  c: x\n  # -- Z.\n  z: 1\n", "no entry for a.z"),
    ],
)
def test_undocumented_or_unschemed_values_are_errors(gen: ModuleType, values: str, error: str) -> None:
    with pytest.raises(gen.DocError, match=error):
        gen.render_table(values, SCHEMA)


def test_table_rows(gen: ModuleType) -> None:
    values = (
        "# Not a doc comment.\n"
        "a:\n"
        "  # -- First line,\n"
        "  # second | line.\n"
        "  b: 1\n"
        "  # -- A string.\n"
        "  # @default -- shown instead\n"
        "  c: x\n"
        "# -- A list; its items are data.\n"
        "d:\n"
        "  - e: 1\n"
        "    f: 2\n"
        "# - commented: example\n"
    )
    table = gen.render_table(values, SCHEMA).splitlines()
    assert table[2:] == [
        "| `a.b` | integer | `1` | First line, second \\| line. |",
        "| `a.c` | string | shown instead | A string. |",
        '| `d` | array | `[{"e": 1, "f": 2}]` | A list; its items are data. |',
    ]
    assert json.loads(json.dumps(SCHEMA)) == SCHEMA  # the generator did not mutate it
