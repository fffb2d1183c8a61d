"""One version for the project: ``secretferry.__version__`` is the source, and everything else that
names a version (the package metadata, the Helm chart, the image label, the CHANGELOG) must say the
same. A release that bumps one place and forgets another fails here, not at a user's upgrade."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import secretferry
from secretferry import metrics

ROOT = Path(__file__).resolve().parents[2]
VERSION = secretferry.__version__


def _chart() -> dict[str, object]:
    loaded = yaml.safe_load((ROOT / "charts" / "secretferry" / "Chart.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _final_stage_lines() -> list[str]:
    """The Dockerfile's last stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    last_from = max(i for i, ln in enumerate(lines) if ln.upper().startswith("FROM "))
    return lines[last_from:]


def _released_versions() -> list[str]:
    """Version headings of CHANGELOG.md, newest first, ``[Unreleased]`` left out."""
    text = (ROOT / "CHANGELOG.md").read_text()
    return re.findall(r"^## \[(\d+\.\d+\.\d+[^\]]*)\]", text, flags=re.MULTILINE)


def test_the_version_is_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", VERSION), VERSION


def test_pyproject_reads_the_version_from_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"], "a second, hand-written version in pyproject.toml"
    assert "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "secretferry.__version__"}


@pytest.mark.parametrize("field", ["version", "appVersion"])
def test_the_chart_has_the_version(field: str) -> None:
    assert str(_chart()[field]) == VERSION, f"charts/secretferry/Chart.yaml {field}"


def test_the_image_is_labelled_with_the_version() -> None:
    final = _final_stage_lines()
    args = dict(
        ln.split(None, 1)[1].split("=", 1) for ln in final if ln.upper().startswith("ARG ") and "=" in ln
    )
    assert args.get("VERSION") == VERSION, "Dockerfile: the final stage's ARG VERSION default"
    labels = " ".join(ln for ln in final if ln.upper().startswith("LABEL "))
    assert 'org.opencontainers.image.version="${VERSION}"' in labels, labels
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels, labels


def test_the_changelog_has_the_version_as_its_latest_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "\n## [Unreleased]\n" in text, "Keep a Changelog: an [Unreleased] section on top"
    released = _released_versions()
    assert released and released[0] == VERSION, f"CHANGELOG.md's latest release is {released[:1]}"
    assert text.index("## [Unreleased]") < text.index(f"## [{VERSION}]")


def test_the_licence_is_the_apache_licence() -> None:
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    assert "the secretferry authors" in licence
    annotations = _chart()["annotations"]
    assert isinstance(annotations, dict) and annotations["artifacthub.io/license"] == "Apache-2.0"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"


def test_the_running_operator_reports_its_version() -> None:
    """``secretferry_build_info`` is set at import, so /metrics names the version from the start."""
    assert metrics.BUILD_INFO is not None
    samples = [s for m in REGISTRY.collect() for s in m.samples if s.name == "secretferry_build_info"]
    assert [(s.labels["version"], s.value) for s in samples] == [(VERSION, 1.0)]
    assert samples[0].labels["python"].startswith("3.")
