"""The committed CRDs in crds/ are exactly what secretferry.crdgen builds, and are structural."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry import crdgen
from secretferry import settings as settings_mod
from secretferry.models import secretsync as sync_models

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
CRDS = crdgen.build_crds()
BY_KIND = {crd["spec"]["names"]["kind"]: crd for crd in CRDS}
REGENERATE = "regenerate with: make crds (secretferry crds -o crds)"


def schema(kind: str) -> dict[str, Any]:
    result: dict[str, Any] = BY_KIND[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return result


@pytest.mark.parametrize("crd", CRDS, ids=crdgen.filename)
def test_committed_file_matches_generator(crd: dict[str, Any]) -> None:
    path = CRD_DIR / crdgen.filename(crd)
    assert path.exists(), f"{path} is missing; {REGENERATE}"
    assert path.read_text(encoding="utf-8") == crdgen.render(crd), f"{path} is stale; {REGENERATE}"


def test_no_stray_files() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(crdgen.filename(c) for c in CRDS)


def test_render_round_trips() -> None:
    for crd in CRDS:
        assert yaml.safe_load(crdgen.render(crd)) == crd


def test_main_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert crdgen.main(["--check", "-o", str(out)]) == 1
    assert crdgen.main(["-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(crdgen.filename(c) for c in CRDS)
    assert crdgen.main(["--check", "-o", str(out)]) == 0
    (out / crdgen.filename(CRDS[0])).write_text("edited", encoding="utf-8")
    assert crdgen.stale_files(out) == [out / crdgen.filename(CRDS[0])]
    assert crdgen.main(["--check", "-o", str(out)]) == 1
    assert crdgen.main(["a", "b"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize(
    ("kind", "plural", "scope", "short"),
    [
        ("SecretSync", "secretsyncs", "Namespaced", ["ssync"]),
        ("MachineIdentity", "machineidentities", "Namespaced", ["mid"]),
        ("ClusterMachineIdentity", "clustermachineidentities", "Cluster", ["cmid"]),
    ],
)
def test_names(kind: str, plural: str, scope: str, short: list[str]) -> None:
    crd = BY_KIND[kind]
    assert crd["metadata"]["name"] == f"{plural}.secretferry.io"
    assert crd["spec"]["group"] == "secretferry.io"
    assert crd["spec"]["scope"] == scope
    names = crd["spec"]["names"]
    assert (names["plural"], names["singular"], names["shortNames"]) == (plural, kind.lower(), short)
    assert names["categories"] == ["secretferry"]
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_secretsync_printer_columns() -> None:
    columns = {c["name"]: c for c in BY_KIND["SecretSync"]["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert list(columns) == ["Ready", "Reason", "Target", "Keys", "Last Sync", "Mode", "Age"]
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Reason"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert columns["Keys"] == {"name": "Keys", "type": "integer", "jsonPath": ".status.syncedKeyCount"}
    assert columns["Last Sync"]["type"] == "date"
    assert columns["Age"]["jsonPath"] == ".metadata.creationTimestamp"


def test_the_apiserver_fills_in_the_refresh_interval_so_no_setting_could_change_it() -> None:
    """spec.refreshInterval has a schema default, which the apiserver applies to every SecretSync
    it stores or serves: the operator never sees one without it, hence no operator setting."""
    spec = schema("SecretSync")["properties"]["spec"]
    assert spec["properties"]["refreshInterval"]["default"] == sync_models.DEFAULT_REFRESH_INTERVAL == "5m"
    assert "default_refresh_interval_seconds" not in settings_mod.Settings.model_fields


def test_a_new_object_reads_as_not_yet_observed() -> None:
    """kstatus calls an object without status Current; every kind's status defaults to
    observedGeneration 0, below a new object's generation 1 (README, "GitOps")."""
    for kind in BY_KIND:
        status = schema(kind)["properties"]["status"]
        assert status["default"] == {}, kind
        assert status["properties"]["observedGeneration"]["default"] == 0, kind


def nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if "items" in node:
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}{{}}")


ALL_NODES = [(kind, path, node) for kind in BY_KIND for path, node in nodes(schema(kind))]


@pytest.mark.parametrize(("kind", "path", "node"), ALL_NODES, ids=[f"{k}{p}" for k, p, _ in ALL_NODES])
def test_structural(kind: str, path: str, node: dict[str, Any]) -> None:
    assert node["type"] in {"object", "array", "string", "integer", "number", "boolean"}
    forbidden = {
        "$ref",
        "$defs",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "nullable",
        "title",
        "const",
        "discriminator",
    }
    assert not forbidden & set(node)
    assert not ("properties" in node and "additionalProperties" in node)
    assert "x-kubernetes-preserve-unknown-fields" not in node or path == ".metadata"
    if "default" in node and path == ".status":
        # The one object default: {} so that observedGeneration's default applies (crdgen._status_schema).
        assert node["default"] == {} and node["properties"]["observedGeneration"]["default"] == 0
    elif "default" in node:
        assert isinstance(node["default"], str | bool | int | float)
        if "enum" in node:
            assert node["default"] in node["enum"]
    for required in node.get("required", []):
        assert required in node["properties"]
    if node["type"] == "object" and path not in {".metadata"}:
        assert "properties" in node or "additionalProperties" in node, "an object needs a shape"


@pytest.mark.parametrize(
    ("kind", "path", "node"), [n for n in ALL_NODES if "x-kubernetes-validations" in n[2]]
)
def test_cel_rules_name_real_fields(kind: str, path: str, node: dict[str, Any]) -> None:
    for rule in node["x-kubernetes-validations"]:
        assert rule["message"]
        for field in re.findall(r"has\(self\.(\w+)\)|self\.(\w+)", rule["rule"]):
            name = field[0] or field[1]
            assert name in node.get("properties", {}), f"{path}: rule names unknown field {name}"


def test_lists_are_bounded_where_cel_might_iterate() -> None:
    # Spec lists have maxItems so CEL rules on their items stay inside the apiserver's cost budget.
    for kind in BY_KIND:
        for path, node in nodes(schema(kind)["properties"]["spec"], ".spec"):
            if node["type"] == "array":
                assert "maxItems" in node, path


@pytest.mark.parametrize(
    ("kind", "path", "rule"),
    [
        (
            "SecretSync",
            ".spec.sources[]",
            "has(self.generatorRef) || (has(self.projectId) != has(self.projectSlug)",
        ),
        ("SecretSync", ".spec.sources[]", "!has(self.generatorRef) || (!has(self.projectId)"),
        ("PasswordGenerator", ".spec", "self.digits + self.symbols <= self.length"),
        ("MachineIdentity", ".spec.auth", "(has(self.kubernetes) ? 1 : 0)"),
        ("ClusterMachineIdentity", ".spec.auth", "(has(self.kubernetes) ? 1 : 0)"),
        ("ClusterMachineIdentity", ".spec.auth.universal", "has(self.credentialsSecretRef)"),
        ("SecretSync", ".spec.refreshInterval", "duration(self) >= duration('1s')"),
        ("SecretSync", ".spec.target.template.templateFrom[]", "has(self.configMap) != has(self.secret)"),
        # A ClusterSecretSync's templateFrom needs the namespace its admin names.
        (
            "ClusterSecretSync",
            ".spec",
            "!has(self.syncTemplate.target) || !has(self.syncTemplate.target.template)",
        ),
    ],
)
def test_exactly_one_of_rules_present(kind: str, path: str, rule: str) -> None:
    node = dict((p, n) for p, n in nodes(schema(kind)))[path]
    assert any(r["rule"].startswith(rule) for r in node["x-kubernetes-validations"])


def test_cluster_kind_requires_namespaces_and_namespaced_kind_has_none() -> None:
    cluster = dict(nodes(schema("ClusterMachineIdentity")))
    namespaced = dict(nodes(schema("MachineIdentity")))
    for ref in (
        ".spec.auth.kubernetes.serviceAccountRef",
        ".spec.auth.universal.clientSecretRef",
        ".spec.auth.universal.credentialsSecretRef",
        ".spec.auth.accessToken.secretRef",
        ".spec.tls.caSecretRef",
    ):
        assert "namespace" in cluster[ref]["required"], ref
        assert "namespace" not in namespaced[ref]["properties"], ref
    assert ".spec.allowedNamespaces" in cluster and ".spec.allowedNamespaces" not in namespaced


def test_labels_are_string_maps() -> None:
    target = dict(nodes(schema("SecretSync")))[".spec.target"]
    for field in ("labels", "annotations"):
        shape = {k: v for k, v in target["properties"][field].items() if k != "description"}
        # maxProperties: the CEL rules over their keys stay inside the apiserver's cost budget.
        assert shape == {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 256}


def test_unsupported_schema_is_refused() -> None:
    with pytest.raises(crdgen.SchemaError, match="unions"):
        crdgen.structural({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    with pytest.raises(crdgen.SchemaError, match="no structural equivalent"):
        crdgen.structural({"type": "string", "patternProperties": {}})


@pytest.mark.parametrize("kind", ["MachineIdentity", "ClusterMachineIdentity"])
def test_identity_status_names_the_list_route(kind: str) -> None:
    status = schema(kind)["properties"]["status"]["properties"]
    assert set(status) >= {"conditions", "tokenExpiresAt", "lastLoginTime", "listEndpoint"}
    assert status["listEndpoint"]["type"] == "string"
    assert status["listEndpoint"]["enum"] == ["/api/v4/secrets", "/api/v3/secrets/raw"]
    assert "v3" in status["listEndpoint"]["description"]


def test_no_printer_column_shows_a_future_time_as_a_date() -> None:
    """kubectl prints a ``date`` column as an age and a future time as ``<invalid>`` (issue 21:
    ``kubectl get mid -o wide`` showed ``<invalid>`` for every token expiry)."""
    future = {".status.tokenExpiresAt"}
    columns = [
        column
        for crd in crdgen.build_crds()
        for version in crd["spec"]["versions"]
        for column in version["additionalPrinterColumns"]
    ]
    expiry = [c for c in columns if c["jsonPath"] in future]
    assert len(expiry) == 2  # MachineIdentity and ClusterMachineIdentity
    assert all(c["type"] == "string" for c in expiry)
