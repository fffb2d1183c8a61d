"""docs/settings.md is exactly what secretferry.settings_reference renders from the Settings model,
and the rendering shows each setting as a reader sets it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from secretferry import settings as settings_mod
from secretferry import settings_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
REGENERATE = "regenerate with: secretferry settings-reference > docs/settings.md"


def test_docs_settings_md_matches_the_model() -> None:
    assert DOC.read_text(encoding="utf-8") == settings_reference.markdown(), f"{DOC} is stale; {REGENERATE}"


def test_every_setting_has_one_row() -> None:
    rows = [
        line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `SECRETFERRY_")
    ]
    variables = [row.split("`")[1] for row in rows]
    assert variables == [f"SECRETFERRY_{name.upper()}" for name in settings_mod.Settings.model_fields]


def test_the_proxy_variables_are_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for variable in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE"):
        assert f"`{variable}`" in text


def test_entries_read_types_bounds_and_defaults_from_the_model() -> None:
    by_env = {e.env: e for e in settings_reference.entries()}
    workers = by_env["SECRETFERRY_WORKERS"]
    assert (workers.kind, workers.default, workers.shown_default) == ("integer ≥ 1", "32", "32")
    expiry = by_env["SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS"]
    assert (expiry.kind, expiry.default) == ("integer 600 to 172800", "600")
    assert by_env["SECRETFERRY_TEMPLATE_CPU_LIMIT_SECONDS"].kind == "number > 0"
    assert by_env["SECRETFERRY_LOG_FORMAT"].kind == "string matching ^(json|text)$"
    assert by_env["SECRETFERRY_ALLOW_INSECURE_HTTP"].default == "false"  # as written in the environment
    assert by_env["SECRETFERRY_STREAMING_REFRESH_INTERVAL_SECONDS"].default == "3600"
    assert by_env["SECRETFERRY_EVENT_DEBOUNCE_SECONDS"].default == "0.01"
    assert by_env["SECRETFERRY_TEMPLATE_MAX_OUTPUT_BYTES"].default == "1048576"
    kubeconfig = by_env["SECRETFERRY_KUBECONFIG"]
    assert (kubeconfig.kind, kubeconfig.unset, kubeconfig.shown_default) == ("string", True, "unset")
    assert by_env["SECRETFERRY_PEERING"].shown_default == "empty"


def test_a_setting_named_in_backticks_is_shown_as_its_variable() -> None:
    namespace = next(e for e in settings_reference.entries() if e.env == "SECRETFERRY_NAMESPACE")
    assert "`SECRETFERRY_HMAC_KEY_SECRET`" in namespace.description
    assert "`hmac_key_secret`" not in namespace.description


def test_markdown_escapes_pipes_in_cells() -> None:
    row = next(
        line for line in settings_reference.markdown().splitlines() if "SECRETFERRY_LOG_FORMAT" in line
    )
    assert "^(json\\|text)$" in row
    assert row.count(" | ") == 3  # four cells, whatever the pattern holds


class _Undocumented(settings_mod.Settings):
    extra_knob: int = 1


class _Unknown(settings_mod.Settings):
    strange: float = Field(1.0, multiple_of=0.5, description="Seconds; halves only.")


class _Renamed(settings_mod.Settings):
    renamed: int = Field(1, alias="OTHER_NAME", description="A count.")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_Undocumented, "extra_knob: every setting needs a description"),
        (_Unknown, r"strange: no reference wording for \['multipleOf'\]"),
        (_Renamed, "renamed: an alias changes the variable's name"),
    ],
)
def test_what_the_reference_cannot_say_raises(model: type[settings_mod.Settings], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_reference.entries(model)
