"""docs/argocd/: the Argo CD health checks and the refresh action, run in Argo CD's Lua interpreter.

hack/luacheck is a small Go program over github.com/yuin/gopher-lua, the library and version Argo
CD runs these scripts with, set up as Argo CD sets it up (no string library, a reduced os); it is
built once per content into ~/.cache/secretferry/go-tools/ (hack/build-go-tool.sh). Every kind's
script is run against a status for every reason of reasons.py (health_table.py says what each
must give), so a new reason or kind cannot go unmapped.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import health_table
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "argocd"
GROUP = "secretferry.io"
GENERATION = 3


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_argocd", ROOT / "hack" / "gen-argocd.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
KINDS = [kind for _, kind in GEN.kinds()]


@pytest.fixture(scope="session")
def luacheck() -> Path:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: hack/luacheck (gopher-lua, as Argo CD runs it) cannot be built")
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-go-tool.sh"), "hack/luacheck"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def run(luacheck: Path, mode: str, script: Path, objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(luacheck), mode, str(script)],
        input="".join(json.dumps(obj) + "\n" for obj in objects),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(objects)
    return results


def health(luacheck: Path, kind: str, objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    results = run(luacheck, "health", DOCS / GROUP / kind / "health.lua", objects)
    assert all("error" not in r for r in results), results
    return results


def obj(kind: str, status: dict[str, Any] | None, *, generation: int = GENERATION) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "team", "generation": generation, "uid": "u-1"},
        "spec": {},
    }
    if status is not None:
        body["status"] = status
    return body


def cond(
    type_: str, status: str, reason: str, message: str = "", generation: int = GENERATION
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def with_conditions(kind: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return obj(kind, {"observedGeneration": GENERATION, "conditions": list(conditions)})


def test_docs_argocd_is_generated_from_the_crds_scripts_and_reasons() -> None:
    assert GEN.stale() == [], "docs/argocd/ is stale: run `make argocd`"


def test_every_kind_of_our_crds_has_a_health_check() -> None:
    assert set(KINDS) >= {"SecretSync", "ClusterSecretSync", "MachineIdentity", "TemporaryPrivilege"}
    assert len(KINDS) == len(list((ROOT / "crds").glob("*.yaml")))
    for kind in KINDS:
        assert (DOCS / GROUP / kind / "health.lua").is_file()


def test_every_reason_constant_is_classified() -> None:
    assert health_table.unclassified() == [], "place each in tests/unit/health_table.py"


def test_every_reason_readme_lists_has_a_row() -> None:
    """README's troubleshooting table is what users look up; each of its reasons is run below."""
    section = (ROOT / "README.md").read_text().split("\n## Troubleshooting by status reason\n", 1)[1]
    listed = set(re.findall(r"^\| `([A-Za-z]+)` \|", section.split("\n## ", 1)[0], flags=re.MULTILINE))
    names = health_table.constants()
    rows = {
        names[n] for n in (*health_table.READY_REASONS, *health_table.ACTIVE_REASONS, *health_table.OTHER)
    }
    assert len(listed) > 50
    assert sorted(listed - rows) == []


def test_the_values_file_carries_exactly_the_scripts() -> None:
    cm = yaml.safe_load((DOCS / "argocd-cm-values.yaml").read_text())["configs"]["cm"]
    for kind in KINDS:
        assert (
            cm.pop(f"resource.customizations.health.{GROUP}_{kind}")
            == (DOCS / GROUP / kind / "health.lua").read_text()
        )
        actions = cm.pop(f"resource.customizations.actions.{GROUP}_{kind}", None)
        if kind not in GEN.FORCE_SYNC_KINDS:
            assert actions is None
            assert not (DOCS / GROUP / kind / "actions").exists()
            continue
        parsed = yaml.safe_load(actions)
        assert parsed["discovery.lua"] == (DOCS / GROUP / kind / "actions" / "discovery.lua").read_text()
        assert parsed["definitions"] == [
            {
                "name": "refresh",
                "action.lua": (DOCS / GROUP / kind / "actions" / "refresh" / "action.lua").read_text(),
            }
        ]
    assert cm == {}


@pytest.mark.parametrize("kind", KINDS)
def test_every_ready_reason_gives_the_health_of_the_table(luacheck: Path, kind: str) -> None:
    names = health_table.constants()
    rows = sorted(health_table.READY_REASONS.items())
    objects = [
        with_conditions(kind, cond("Ready", row.ready, names[name], f"what {name} means"))
        for name, row in rows
    ]
    got = {name: r["status"] for (name, _), r in zip(rows, health(luacheck, kind, objects), strict=True)}
    assert got == {name: row.argo for name, row in rows}


@pytest.mark.parametrize("kind", KINDS)
def test_the_message_is_the_ready_reason_and_message(luacheck: Path, kind: str) -> None:
    (result, bare) = health(
        luacheck,
        kind,
        [
            with_conditions(kind, cond("Ready", "False", "SourceNotFound", "project app: not found")),
            with_conditions(kind, cond("Ready", "True", "Synced")),
        ],
    )
    assert result == {"status": "Degraded", "message": "SourceNotFound: project app: not found"}
    assert bare == {"status": "Healthy", "message": "Synced"}


@pytest.mark.parametrize("kind", KINDS)
def test_progressing_until_the_operator_has_seen_this_generation(luacheck: Path, kind: str) -> None:
    synced = cond("Ready", "True", "Synced")
    results = health(
        luacheck,
        kind,
        [
            obj(kind, None, generation=1),  # as created, on an apiserver without our CRD's default
            obj(kind, {"observedGeneration": 0}, generation=1),  # as created: the CRD's default
            obj(kind, {"observedGeneration": GENERATION}),  # a status without conditions
            obj(kind, {"observedGeneration": GENERATION - 1, "conditions": [synced]}),  # spec changed
            obj(
                kind,
                {"observedGeneration": GENERATION, "conditions": [cond("Ready", "True", "Synced", "", 2)]},
            ),
            obj(kind, {"observedGeneration": GENERATION, "conditions": [cond("Stalled", "True", "X")]}),
            obj(kind, {"observedGeneration": GENERATION, "conditions": [cond("Ready", "Maybe", "X")]}),
        ],
    )
    assert [r["status"] for r in results] == ["Progressing"] * len(results)
    assert results[1]["message"] == "Waiting for the secretferry operator to reconcile this resource"
    assert results[3]["message"] == (
        "Waiting for the secretferry operator to observe generation 3 (status is for generation 2)"
    )


def test_a_temporary_privilege_waiting_for_its_window_is_suspended(luacheck: Path) -> None:
    names = health_table.constants()
    granted = cond("Ready", "True", "Granted")
    rows = sorted(health_table.ACTIVE_REASONS.items())
    objects = [
        with_conditions("TemporaryPrivilege", cond("Active", status, names[name], "window"), granted)
        for name, (status, _) in rows
    ]
    results = health(luacheck, "TemporaryPrivilege", objects)
    assert {name: r["status"] for (name, _), r in zip(rows, results, strict=True)} == {
        name: argo for name, (_, argo) in rows
    }
    assert results[[n for n, _ in rows].index("PENDING")]["message"] == "Pending: window"
    # Active only counts while Ready is True: a refused grant is Degraded whatever Active says.
    (refused,) = health(
        luacheck,
        "TemporaryPrivilege",
        [
            with_conditions(
                "TemporaryPrivilege",
                cond("Active", "False", "Pending"),
                cond("Ready", "False", "GrantRefused"),
            )
        ],
    )
    assert refused["status"] == "Degraded"


@pytest.mark.parametrize("kind", GEN.FORCE_SYNC_KINDS)
def test_the_refresh_action_sets_a_new_force_sync_value(luacheck: Path, kind: str) -> None:
    actions = DOCS / GROUP / kind / "actions"
    (discovered,) = run(luacheck, "discovery", actions / "discovery.lua", [obj(kind, None)])
    assert discovered == {"refresh": {"disabled": False}}

    plain, annotated = obj(kind, None), obj(kind, None)
    # Non-empty maps only: an empty table comes back as [] (Argo CD mends that after the script).
    for body in (plain, annotated):
        body["spec"] = {"identityRef": {"name": "id"}}
    annotated["metadata"]["annotations"] = {"team": "a", "secretferry.io/force-sync": "old"}
    results = run(luacheck, "action", actions / "refresh" / "action.lua", [plain, annotated])
    for before, after in zip([plain, annotated], results, strict=True):
        annotations = after["metadata"].pop("annotations")
        value = annotations.pop("secretferry.io/force-sync")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value)
        assert annotations == {
            k: v
            for k, v in (before["metadata"].get("annotations") or {}).items()
            if k != "secretferry.io/force-sync"
        }
        before["metadata"].pop("annotations", None)
        assert after == before  # nothing else changed: spec, status, generation as they were


def test_the_interpreter_is_argo_cds_sandbox(luacheck: Path, tmp_path: Path) -> None:
    """What makes these tests worth having: a script that works in a full Lua but not in Argo CD
    (the string library is not loaded there) fails here too."""
    script = tmp_path / "health.lua"
    script.write_text('return {status = "Healthy", message = string.format("%d", obj.metadata.generation)}\n')
    (result,) = run(luacheck, "health", script, [obj("SecretSync", None)])
    assert "error" in result and "format" in result["error"]
    script.write_text('return {status = "Fine"}\n')
    (result,) = run(luacheck, "health", script, [obj("SecretSync", None)])
    assert result == {"status": "Unknown", "message": "Lua returned an invalid health status"}
