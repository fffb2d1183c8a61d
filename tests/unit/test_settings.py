"""secretferry.settings: the template limits, and descriptions that name each setting's unit (the
rest is exercised by every other test)."""

from __future__ import annotations

from types import SimpleNamespace

import pydantic
import pytest

from secretferry import settings as settings_mod
from secretferry.backoff import Backoff
from secretferry.reconcile import streaming
from secretferry.reconcile.rendering import pool as renderpool


def test_the_deadline_must_be_above_the_cpu_limit() -> None:
    with pytest.raises(pydantic.ValidationError, match="template_timeout_seconds"):
        settings_mod.Settings(template_cpu_limit_seconds=2, template_timeout_seconds=2)
    limits = renderpool.limits_from(settings_mod.Settings())
    assert limits == renderpool.Limits(
        cpu_seconds=1.0, timeout_seconds=5.0, memory_bytes=64 * 1024 * 1024, max_output_bytes=1024 * 1024
    )


# A setting's name ends in its unit (house habit); its description, which is all a user reads in
# docs/settings.md and `secretferry run --help`, must say the same unit in words.
UNIT_WORDS = {
    "_seconds": "seconds",
    "_mib": "mib",
    "_bytes": "bytes",
    "_fraction": "fraction",
    "_heartbeats": "heartbeat periods",
    "_port": "port",
    "workers": "(a count)",
}


@pytest.mark.parametrize(
    "name", [n for n in settings_mod.Settings.model_fields if n.endswith(tuple(UNIT_WORDS))]
)
def test_a_description_names_the_unit_of_its_setting(name: str) -> None:
    suffix = next(s for s in UNIT_WORDS if name.endswith(s))
    description = str(settings_mod.Settings.model_fields[name].description)
    assert UNIT_WORDS[suffix] in description.lower(), f"{name}: {description}"


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"backoff_initial_seconds": 0}, "backoff_initial_seconds"),
        ({"backoff_max_seconds": -1}, "backoff_max_seconds"),
        ({"backoff_initial_seconds": 120, "backoff_max_seconds": 60}, "at least backoff_initial_seconds"),
    ],
)
def test_a_backoff_that_is_no_schedule_stops_start_up(env: dict[str, float], complaint: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=complaint):
        settings_mod.Settings(**env)  # type: ignore[arg-type]


def test_a_start_above_the_streams_cap_still_gives_streams_a_schedule() -> None:
    slow = settings_mod.Settings(backoff_initial_seconds=120, backoff_max_seconds=600)
    s = streaming.Streaming(
        settings=slow,
        identities=SimpleNamespace(),  # type: ignore[arg-type]
        scopes=SimpleNamespace(),  # type: ignore[arg-type]
        fetcher=SimpleNamespace(),  # type: ignore[arg-type]
        queue=SimpleNamespace(),  # type: ignore[arg-type]
        background=SimpleNamespace(),  # type: ignore[arg-type]
    )
    manager = s.manager
    Backoff(manager._backoff_initial, manager._backoff_max)  # raised before: initial above the cap
    assert manager._backoff_initial == manager._backoff_max == 60.0


def test_forbidden_target_keys_parse_at_start_up() -> None:
    """An entry that names no key would refuse nothing: start-up stops instead."""
    settings = settings_mod.Settings(forbidden_target_keys="example.com/, team")
    assert settings.forbidden_target_keys == "example.com/, team"
    with pytest.raises(pydantic.ValidationError, match="forbidden target key entry 'a b'"):
        settings_mod.Settings(forbidden_target_keys="example.com/, a b")
