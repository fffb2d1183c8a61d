"""Service origins (allow-list entries and hostAPI URLs) and the settings that use them."""

from __future__ import annotations

import pydantic
import pytest

from secretferry import origins
from secretferry import settings as settings_mod

Or = origins.Origin
Url = origins.ServiceURL


@pytest.mark.parametrize(
    ("url", "scheme", "origin"),
    [
        ("https://app.infisical.com", "https", Or("app.infisical.com", 443)),
        ("https://App.Infisical.com./api/", "https", Or("app.infisical.com", 443)),
        ("http://127.0.0.1:8222", "http", Or("127.0.0.1", 8222)),
        ("HTTP://localhost", "http", Or("localhost", 80)),
        ("https://[::1]:8443/x", "https", Or("::1", 8443)),
    ],
)
def test_parse_url(url: str, scheme: str, origin: origins.Origin) -> None:
    assert origins.parse_url(url) == origins.ServiceURL(scheme, origin)


@pytest.mark.parametrize(
    "url",
    [
        "app.infisical.com",
        "ftp://x",
        "https://",
        "https://u@x",
        "https://u:p@x",
        "https://x\\y",
        "https://x%2e",
        "https://x?y",
        "https://x/#y",
        "https://x /",
        "https://x\n",
        "https://x:port",
        "https://x:70000",
    ],
)
def test_parse_url_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        origins.parse_url(url)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("", []),
        (" , ", []),
        # A bare host[:port] means https; plain http must be written as a URL.
        ("secrets.example.com", [Url("https", Or("secrets.example.com", 443))]),
        (
            "secrets.example.com:8443, http://127.0.0.1:8222",
            [Url("https", Or("secrets.example.com", 8443)), Url("http", Or("127.0.0.1", 8222))],
        ),
        ("[::1]:9", [Url("https", Or("::1", 9))]),
        ("HTTP://svc.internal", [Url("http", Or("svc.internal", 80))]),
    ],
)
def test_parse_list(text: str, parsed: list[origins.ServiceURL]) -> None:
    assert origins.parse_list(text) == parsed


@pytest.mark.parametrize("text", ["a@b", "host/path", "x:y", "https://a@b", "ok.example, bad host"])
def test_parse_list_names_the_bad_entry(text: str) -> None:
    with pytest.raises(ValueError, match="is not a URL or host"):
        origins.parse_list(text)


@pytest.mark.parametrize(
    ("origin", "loopback"),
    [
        (Or("127.0.0.1", 1), True),
        (Or("127.8.9.10", 1), True),
        (Or("::1", 1), True),
        (Or("localhost", 1), True),
        (Or("10.0.0.1", 1), False),
        (Or("localhost.example", 1), False),
        (Or("0.0.0.0", 1), False),
    ],
)
def test_is_loopback(origin: origins.Origin, loopback: bool) -> None:
    assert origins.is_loopback(origin) is loopback


@pytest.mark.parametrize(
    ("env", "ok"),
    [
        ({}, True),
        ({"default_host_api": "http://127.0.0.1:8222"}, True),
        ({"default_host_api": "http://svc.internal:8080"}, False),
        ({"default_host_api": "http://svc.internal:8080", "allow_insecure_http": True}, True),
        ({"default_host_api": "https://a@b"}, False),
        ({"allowed_hosts": "https://secrets.example.com,vault:8443"}, True),
        ({"allowed_hosts": "https://a@b"}, False),
        ({"max_token_expiration_seconds": 599}, False),
        ({"max_token_expiration_seconds": 172801}, False),
    ],
)
def test_settings_fail_fast_on_hosts(env: dict[str, object], ok: bool) -> None:
    if ok:
        settings_mod.Settings(**env)  # type: ignore[arg-type]
    else:
        with pytest.raises(pydantic.ValidationError):
            settings_mod.Settings(**env)  # type: ignore[arg-type]
