"""The real server's webhook signature rule, and what a verified body may say."""

from __future__ import annotations

import json

import pytest

from secretferry.service import webhook_signature as sig

KEY = "k-" + "x" * 30
NOW = 1_790_000_000_000  # ms


def _body(ts: int = NOW, **project: str) -> bytes:
    doc = {
        "event": "secrets.modified",
        "project": {
            "workspaceId": "p1",
            "projectId": "p1",
            "projectName": "P",
            "environment": "dev",
            "secretPath": "/app",
            **project,
        },
        "timestamp": ts,
    }
    return json.dumps(doc, separators=(",", ":")).encode()  # JSON.stringify's shape


def test_the_signature_is_hex_hmac_sha256_of_the_raw_body_with_the_secret_key() -> None:
    # Known answer from openssl: printf '{"a":1}' | openssl dgst -sha256 -hmac key
    assert sig.sign(b'{"a":1}', "key") == "88a67f24bbcdaed0e6c997404bb79a743baf44c6bab2f4c27328e3009d22e342"
    assert sig.header_value(b'{"a":1}', "key", 5) == "t=5;" + sig.sign(b'{"a":1}', "key")


def _verify(header: str | None, body: bytes, *, keys: tuple[str, ...] = (KEY,), now: int = NOW) -> str:
    return sig.verify(header, body, keys=keys, now_ms=now, window_seconds=300)[0]


@pytest.mark.parametrize(
    ("case", "header", "expected"),
    [
        ("signed", sig.header_value(_body(), KEY, NOW), sig.OK),
        ("no header", None, sig.MISSING),
        ("empty header", "", sig.MISSING),
        ("no t=", sig.sign(_body(), KEY), sig.MALFORMED),
        ("comma not semicolon", f"t={NOW},{sig.sign(_body(), KEY)}", sig.MALFORMED),
        ("short digest", f"t={NOW};abcd", sig.MALFORMED),
        ("not hex", f"t={NOW};" + "z" * 64, sig.MALFORMED),
        ("wrong key", sig.header_value(_body(), "other", NOW), sig.FORGED),
        ("other body's signature", sig.header_value(_body(secretPath="/x"), KEY, NOW), sig.FORGED),
        ("base64 not hex", f"t={NOW};" + "A" * 63 + "=", sig.MALFORMED),
        ("header t differs from the signed body's", sig.header_value(_body(), KEY, NOW + 1), sig.MALFORMED),
        ("uppercase hex", f"t={NOW};{sig.sign(_body(), KEY).upper()}", sig.OK),
    ],
)
def test_signature_table(case: str, header: str | None, expected: str) -> None:
    assert _verify(header, _body()) == expected, case


def test_a_rotation_overlaps_either_key_verifies_and_no_key_refuses_all() -> None:
    body = _body()
    assert _verify(sig.header_value(body, KEY, NOW), body, keys=("new", KEY)) == sig.OK
    assert _verify(sig.header_value(body, KEY, NOW), body, keys=()) == sig.NO_KEY


@pytest.mark.parametrize(
    ("age_ms", "expected"),
    [(0, sig.OK), (299_000, sig.OK), (-299_000, sig.OK), (301_000, sig.STALE), (-301_000, sig.STALE)],
)
def test_replay_window(age_ms: int, expected: str) -> None:
    ts = NOW - age_ms
    body = _body(ts)
    assert _verify(sig.header_value(body, KEY, ts), body) == expected


def test_a_verified_body_gives_only_the_location() -> None:
    body = _body(secretPath="/app/db")
    result, change = sig.verify(
        sig.header_value(body, KEY, NOW), body, keys=(KEY,), now_ms=NOW, window_seconds=300
    )
    assert result == sig.OK
    assert change == sig.Change(workspace_id="p1", environment="dev", secret_path="/app/db")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"event": "secrets.reminder-expired", "project": {}, "timestamp": NOW}, sig.IGNORED),
        ({"event": "secrets.modified", "project": {"workspaceId": "p1"}, "timestamp": NOW}, sig.MALFORMED),
        ({"event": "secrets.modified", "project": "x", "timestamp": NOW}, sig.MALFORMED),
        ([1, 2], sig.MALFORMED),
    ],
)
def test_signed_but_unusable_bodies_change_nothing(doc: object, expected: str) -> None:
    body = json.dumps(doc).encode()
    assert _verify(sig.header_value(body, KEY, NOW), body) == expected
