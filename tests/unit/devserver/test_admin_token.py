"""The admin token: given, or generated at start into a 0600 file whose path (never the token) is logged."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import httpx
import pytest
from devserver_fixtures import T0
from fastapi import FastAPI

from secretferry.devserver import admin_token, cli
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _client(app: FastAPI, token: str | None) -> httpx.AsyncClient:
    headers = {} if token is None else {admin_token.HEADER: token}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dev", headers=headers)


async def _stats_status(config: DevServerConfig, token: str | None) -> int:
    async with _client(create_app(config), token) as c:
        return (await c.get("/_admin/stats")).status_code


def test_generated_token_is_written_0600_and_only_its_path_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    data = tmp_path / "dev.sqlite"
    app = create_app(DevServerConfig(data_path=data, clock=lambda: T0))
    token_file = tmp_path / "dev.sqlite.admin-token"
    assert _mode(token_file) == 0o600
    token = token_file.read_text().strip()
    assert len(token) == 64 and token == app.state.dev.admin_token
    lines = [r.getMessage() for r in caplog.records if r.name == admin_token.__name__]
    assert len(lines) == 1 and str(token_file) in lines[0]
    assert token not in caplog.text
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


async def test_generated_token_opens_the_admin_api_and_changes_at_every_start(tmp_path: Path) -> None:
    config = DevServerConfig(data_path=tmp_path / "dev.sqlite", clock=lambda: T0)
    token_file = tmp_path / "dev.sqlite.admin-token"
    app = create_app(config)
    first = token_file.read_text().strip()
    async with _client(app, None) as c:
        assert (await c.get("/_admin/stats")).status_code == 401
    async with _client(app, first) as c:
        assert (await c.get("/_admin/stats")).status_code == 200
    restarted = create_app(config)  # same SQLite file, a new start
    second = token_file.read_text().strip()
    assert second != first
    async with _client(restarted, first) as c:
        assert (await c.get("/_admin/stats")).status_code == 401
    async with _client(restarted, second) as c:
        assert (await c.get("/_admin/stats")).status_code == 200


def test_token_file_flag_and_a_wider_file_in_the_way(tmp_path: Path) -> None:
    chosen = tmp_path / "secrets" / "admin"
    chosen.parent.mkdir()
    chosen.write_text("stale")
    chosen.chmod(0o644)
    config = DevServerConfig(data_path=tmp_path / "dev.sqlite", admin_token_file=chosen, clock=lambda: T0)
    app = create_app(config)
    assert _mode(chosen) == 0o600 and chosen.read_text().strip() == app.state.dev.admin_token
    assert not (tmp_path / "dev.sqlite.admin-token").exists()


async def test_a_given_token_writes_no_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    config = DevServerConfig(data_path=tmp_path / "dev.sqlite", admin_token="g1v3n-t0k3n", clock=lambda: T0)
    assert await _stats_status(config, "g1v3n-t0k3n") == 200
    assert not (tmp_path / "dev.sqlite.admin-token").exists()
    assert "g1v3n-t0k3n" not in caplog.text


async def test_in_memory_without_a_file_stays_locked(caplog: pytest.LogCaptureFixture) -> None:
    assert await _stats_status(DevServerConfig(clock=lambda: T0), None) == 401
    assert "written nowhere" in caplog.text


def test_cli_flags() -> None:
    args = cli.parser().parse_args(["--data", "/d/x.sqlite", "--admin-token-file", "/run/admin"])
    config = cli.config_from(args)
    assert (config.admin_token, config.admin_token_file) == (None, Path("/run/admin"))
    assert cli.config_from(cli.parser().parse_args([])).admin_token_file is None
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--admin-token", "t", "--admin-token-file", "/run/admin"])


@pytest.mark.parametrize(
    ("provided", "expected", "ok"),
    [(None, "t", False), ("", "t", False), ("t", "t", True), ("t ", "t", False), ("é", "é", True)],
)
def test_matches(provided: str | None, expected: str, ok: bool) -> None:
    assert admin_token.matches(provided, expected) is ok


def test_default_path() -> None:
    assert admin_token.default_path(Path("/d/x.sqlite")) == Path("/d/x.sqlite.admin-token")
    assert admin_token.default_path(Path(":memory:")) is None
