"""secretferry.settings: the template limits (the rest is exercised by every other test)."""

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
