"""Every field of every committed CRD has a `kubectl explain` description fit for users.

Reads ``crds/*.yaml`` (what is installed; ``test_crds.py`` ties those files to the generator) and
walks every property at every depth, array items and map values included. Descriptions come from
the models' attribute docstrings (``use_attribute_docstrings``), falling back to the class
docstring of a nested model, so a new field without a docstring fails here by its path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry import settings as settings_mod
from secretferry.models import labels
from secretferry.reconcile import tenancy
from secretferry.reconcile.rendering import templating

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
CRDS = {
    crd["spec"]["names"]["kind"]: crd
    for crd in (yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(CRD_DIR.glob("*.yaml")))
}

# Users read these in `kubectl explain`: they have no access to our design documents, source files
# or issue tracker, so a description must not point there.
_INTERNAL = re.compile(
    r"[\w./-]+\.(?:md|py)\b"  # design.md, service-contract.md, reconcile/tenancy.py
    r"|\bissues?\s*#?\d+"  # issue 15, issue #15
    r"|(?<![\w{$])#\d+\b",  # #15
    re.IGNORECASE,
)


def properties(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every property below ``node``, depth first."""
    for name, sub in node.get("properties", {}).items():
        yield f"{path}.{name}", sub
        yield from properties(sub, f"{path}.{name}")
    if "items" in node:
        yield from properties(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from properties(node["additionalProperties"], f"{path}{{}}")


def root(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def described(kind: str) -> dict[str, str]:
    """Property path (``.spec.sources[].path``) -> description, for every property of ``kind``."""
    return {path: node.get("description", "") for path, node in properties(root(kind), "")}


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_metadata_says_only_its_type(kind: str) -> None:
    assert root(kind)["properties"]["metadata"] == {"type": "object"}


def test_every_kind_is_read() -> None:
    assert set(CRDS) == {
        "SecretSync",
        "MachineIdentity",
        "ClusterMachineIdentity",
        "PasswordGenerator",
        "UUIDGenerator",
        "ClusterSecretSync",
        "DynamicSecretLease",
        "PushSecret",
        "TemporaryPrivilege",
    }


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_property_has_a_description(kind: str) -> None:
    # ``.metadata`` is the one exception: the apiserver refuses a CRD that says anything about it
    # but its type, a description included.
    missing = [path for path, text in described(kind).items() if not text.strip() and path != ".metadata"]
    assert root(kind).get("description", "").strip(), f"{kind}: the object itself has no description"
    assert not missing, f"{kind}: properties without a description:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_descriptions_name_no_internal_documents(kind: str) -> None:
    texts = {"": root(kind).get("description", ""), **described(kind)}
    leaks = {path: m.group(0) for path, text in texts.items() if (m := _INTERNAL.search(text))}
    assert not leaks, f"{kind}: descriptions pointing at internal documents: {leaks}"


@pytest.mark.parametrize(
    "text", ["see design.md", "service-contract.md §3", "per issue 15", "issue #15", "(#15)", "tenancy.py"]
)
def test_internal_pattern_catches(text: str) -> None:
    assert _INTERNAL.search(text)


@pytest.mark.parametrize("text", ["`${DB_HOST}`", "`{{ DB_USER }}`", "kubernetes.io/tls", "1,000 items"])
def test_internal_pattern_spares_user_text(text: str) -> None:
    assert not _INTERNAL.search(text)


def test_durations_give_units_and_an_example() -> None:
    sync = described("SecretSync")
    assert re.search(r"`30s`.*`5m`.*`1h30m`", sync[".spec.refreshInterval"])
    for kind in ("MachineIdentity", "ClusterMachineIdentity"):
        text = described(kind)[".spec.auth.kubernetes.tokenExpirationSeconds"]
        assert "in seconds" in text and "e.g." in text


def test_key_globs_say_which_syntax() -> None:
    """desired.select_keys matches with fnmatch.fnmatchcase: case-sensitive, no escapes."""
    sync = described("SecretSync")
    include = sync[".spec.sources[].includeKeys"]
    assert "fnmatch" in include and "case-sensitive" in include and "e.g." in include
    assert "includeKeys" in sync[".spec.sources[].excludeKeys"]


def test_templates_state_variables_and_the_sandbox_limits() -> None:
    """The limits quoted are the operator's defaults and the sandbox's range cap, read from code."""
    text = described("SecretSync")[".spec.target.template.data"]
    fields = settings_mod.Settings.model_fields
    cpu = fields["template_cpu_limit_seconds"].default
    wall = fields["template_timeout_seconds"].default
    memory = fields["template_memory_limit_mib"].default
    output = fields["template_max_output_bytes"].default
    assert (cpu, wall, memory, output) == (1.0, 5.0, 64, 1024 * 1024), "update the template description"
    for phrase in ("1 s CPU", "5 s wall clock", "64 MiB memory", "1 MiB output", f"{templating.MAX_RANGE:,}"):
        assert phrase in text, phrase
    assert f"`{templating.SECRETS_VAR}`" in text and "sandbox" in text and "e.g." in text


@pytest.mark.parametrize(
    "path",
    [
        ".spec.auth.kubernetes.serviceAccountRef",
        ".spec.auth.universal.clientSecretRef",
        ".spec.auth.universal.credentialsSecretRef",
        ".spec.auth.accessToken.secretRef",
        ".spec.tls.caSecretRef",
    ],
)
def test_credential_references_state_the_opt_in(path: str) -> None:
    assert tenancy.ALLOWED_IDENTITIES_ANNOTATION in described("MachineIdentity")[path]
    assert "no opt-in" in described("ClusterMachineIdentity")[path]


def test_host_states_who_may_name_which_host() -> None:
    for kind in ("MachineIdentity", "ClusterMachineIdentity"):
        text = described(kind)[".spec.hostAPI"]
        assert "default host" in text and "SECRETFERRY_ALLOWED_HOSTS" in text


def test_target_states_the_merge_opt_in() -> None:
    sync = described("SecretSync")
    for path in (".spec.target.creationPolicy", ".spec.target.annotations"):
        assert labels.MERGE_FROM_ANNOTATION in sync[path], path
    assert labels.SYNC_LABEL in sync[".spec.target.name"]
