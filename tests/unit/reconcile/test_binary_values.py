"""secretferry.reconcile.rendering.binary: base64 decoding by strategy, table-tested, and the
text-or-bytes invariant (``normalize``)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secretferry.reconcile.rendering import binary

RAW = bytes(range(256))
STD = base64.b64encode(RAW).decode()
URL = base64.urlsafe_b64encode(RAW).decode()


@pytest.mark.parametrize(
    ("strategy", "text", "expected"),
    [
        # None: always as it is.
        ("None", "aGVsbG8=", "aGVsbG8="),
        ("None", "", ""),
        # Base64: standard alphabet; bytes that are UTF-8 come back as text.
        ("Base64", "aGVsbG8=", "hello"),
        ("Base64", "aGVsbG8", "hello"),  # padding optional
        ("Base64", "aGVs\nbG8=\n", "hello"),  # line breaks ignored (base64 wraps at 76)
        ("Base64", " aGVs\r\n\tbG8= ", "hello"),  # any ASCII whitespace
        ("Base64", "", ""),  # the empty value decodes to nothing
        ("Base64", "/w==", b"\xff"),  # not UTF-8: bytes
        ("Base64", "+/8=", b"\xfb\xff"),
        ("Base64", STD, RAW),
        ("Base64", "4pyT", "✓"),  # UTF-8 multi-byte text
        ("Base64", "YR==", "a"),  # non-canonical trailing bits are accepted, as base64 -d does
        # Base64 refusals.
        ("Base64", "_-8=", None),  # URL alphabet under Base64
        ("Base64", "aGVsbG8==", None),  # wrong padding (9 characters)
        ("Base64", "aGVsb", None),  # 4n+1 data characters
        ("Base64", "aG=Vs", None),  # padding in the middle
        ("Base64", "a===", None),  # three padding characters
        ("Base64", "not base64!", None),
        ("Base64", "aGVsbG8=é", None),  # non-ASCII
        ("Base64", "=", None),
        # Base64URL: the URL alphabet, padding optional.
        ("Base64URL", "_-8=", b"\xff\xef"),
        ("Base64URL", "_-8", b"\xff\xef"),
        ("Base64URL", URL, RAW),
        ("Base64URL", URL.rstrip("="), RAW),
        ("Base64URL", "aGVsbG8", "hello"),
        ("Base64URL", "+/8=", None),  # standard alphabet under Base64URL
        ("Base64URL", "a", None),
        # Auto: canonical padded encodings only, else as it is, never an error.
        ("Auto", "aGFwcHkgc3RyZWV0", "happy street"),  # ESO's example
        ("Auto", "Gustavo", "Gustavo"),  # 7 characters: not padded base64
        ("Auto", "YQ==", "a"),
        ("Auto", "YR==", "YR=="),  # not canonical: YQ== is the encoding of "a"
        ("Auto", "YQ", "YQ"),  # unpadded: Base64URL's job, not Auto's
        ("Auto", "_-8=", b"\xff\xef"),  # padded base64url
        ("Auto", "_-8", "_-8"),
        ("Auto", "+/8=", b"\xfb\xff"),
        ("Auto", STD, RAW),
        ("Auto", "Zm9v\n", "Zm9v\n"),  # whitespace: nothing is ignored
        ("Auto", "", ""),
        ("Auto", "p@ss", "p@ss"),
        ("Auto", "a b ", "a b "),
        ("Auto", "x=1=", "x=1="),
        ("Auto", "-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----"),
        ("Auto", "+/_-", "+/_-"),  # both alphabets mixed
        # The documented trap: a word of 4n letters is canonical base64.
        ("Auto", "test", b"\xb5\xeb-"),
        ("Auto", "password", b"\xa5\xab,\xc2\x8a\xdd"),
    ],
)
def test_decode(strategy: binary.Strategy, text: str, expected: str | bytes | None) -> None:
    assert binary.decode(text, strategy) == expected


@given(st.binary(max_size=64))
def test_every_encoding_round_trips(data: bytes) -> None:
    want = binary.normalize(data)
    std, url = base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()
    assert binary.decode(std, "Base64") == want
    assert binary.decode(base64.encodebytes(data).decode(), "Base64") == want
    assert binary.decode(url, "Base64URL") == want
    assert binary.decode(url.rstrip("="), "Base64URL") == want
    assert binary.decode(std, "Auto") == (want if data else "")
    assert binary.decode(url, "Auto") == (want if data else "")


@given(st.text(max_size=40))
def test_auto_never_fails_and_decodes_only_what_it_gives_back(text: str) -> None:
    value = binary.decode(text, "Auto")
    assert value is not None
    if value != text:
        raw = binary.as_bytes(value)
        assert text in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode())


def test_normalize_keeps_bytes_only_when_not_utf8() -> None:
    assert binary.normalize(b"abc") == "abc"
    assert binary.normalize("é".encode()) == "é"
    assert binary.normalize(b"\xff") == b"\xff"
    assert binary.normalize(b"\xed\xa0\x80") == b"\xed\xa0\x80"  # a surrogate is not UTF-8
    assert binary.as_bytes("é") == "é".encode() and binary.as_bytes(b"\xff") == b"\xff"


def test_decoding_is_linear_on_a_large_hostile_value() -> None:
    # 1 MiB of base64 characters with a bad one at the end: one pass, no backtracking.
    text = "A" * (1024 * 1024) + "!"
    assert binary.decode(text, "Base64") is None
    assert binary.decode(text, "Auto") == text
