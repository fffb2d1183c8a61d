"""The chart carries the same CRDs as crds/ (copied by hack/sync-chart-crds.sh) and renders them
unchanged apart from labels and the keep annotation."""

from __future__ import annotations

from pathlib import Path

import yaml
from chart_helpers import CHART, ROOT, Render, by_kind

SOURCE = ROOT / "crds"
COPY = CHART / "files" / "crds"
FIX = "run `bash hack/sync-chart-crds.sh` (make chart-crds)"


def _names(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*.yaml")}


def test_chart_copy_matches_crds_dir() -> None:
    assert _names(SOURCE), "crds/ is empty: run `make crds`"
    assert _names(COPY) == _names(SOURCE), FIX
    drifted = [n for n in sorted(_names(SOURCE)) if (COPY / n).read_bytes() != (SOURCE / n).read_bytes()]
    assert not drifted, f"chart CRDs differ from crds/ for {drifted}: {FIX}"


def test_rendered_crds_keep_the_generated_spec(render: Render) -> None:
    rendered = {d["metadata"]["name"]: d for d in by_kind(render(), "CustomResourceDefinition")}
    for path in sorted(SOURCE.glob("*.yaml")):
        source = yaml.safe_load(path.read_text())
        name = source["metadata"]["name"]
        assert rendered[name]["spec"] == source["spec"], name
        assert rendered[name]["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert rendered[name]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_crds_keep_false_drops_the_annotation(render: Render) -> None:
    for crd in by_kind(render(set_values=["crds.keep=false"]), "CustomResourceDefinition"):
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


def test_crds_disabled_renders_none(render: Render) -> None:
    assert by_kind(render(set_values=["crds.enabled=false"]), "CustomResourceDefinition") == []
