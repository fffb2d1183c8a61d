"""``--profile``: a named bundle of config values, with explicit flags on top."""

from __future__ import annotations

import pytest

from secretferry.devserver import cli, profiles


def _config(*argv: str) -> cli.DevServerConfig:
    return cli.config_from(cli.parser().parse_args(list(argv)))


def test_newest_is_every_default() -> None:
    assert profiles.overrides("newest") == {}
    assert _config().v4_secrets is True


def test_selfhosted_2024_10_has_no_v4_list() -> None:
    assert _config("--profile", "selfhosted-2024-10").v4_secrets is False


def test_an_explicit_flag_beside_a_profile_wins() -> None:
    config = _config("--profile", "selfhosted-2024-10", "--stream-cap", "2", "--token-error-status", "403")
    assert (config.v4_secrets, config.stream_cap, config.token_error_status) == (False, 2, 403)


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--profile", "selfhosted-1999"])


def test_every_profile_names_real_config_fields() -> None:
    fields = set(cli.DevServerConfig.__dataclass_fields__)
    for name, values in profiles.PROFILES.items():
        assert set(values) <= fields, name
