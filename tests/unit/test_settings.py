"""secretferry.settings: the template limits, and descriptions that name each setting's unit (the
rest is exercised by every other test)."""

from __future__ import annotations

import pydantic
import pytest

from secretferry import settings as settings_mod
from secretferry.reconcile import renderpool


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
