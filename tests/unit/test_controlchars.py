"""secretferry.controlchars: what cannot be seen is written out, so no text forges a line."""

from __future__ import annotations

import pytest

from secretferry import controlchars


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain /path/to key_NAME-1.x", "plain /path/to key_NAME-1.x"),
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("tab\there", "tab\\there"),
        ("nul\x00 esc\x1b[31m del\x7f", "nul\\x00 esc\\x1b[31m del\\x7f"),
        ("next line\x85 csi\x9b", "next line\\x85 csi\\x9b"),  # C1
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("admin\u202e\u2066txt.exe\u2069\u200f", "admin\\u202e\\u2066txt.exe\\u2069\\u200f"),  # bidi
        ("back\\slash and ünïcødé ✓", "back\\slash and ünïcødé ✓"),  # visible: kept
    ],
)
def test_escape(text: str, shown: str) -> None:
    assert controlchars.escape(text) == shown
    assert "\n" not in controlchars.escape(text)


def test_every_c0_and_c1_control_is_escaped() -> None:
    every = "".join(chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)])
    assert controlchars.escape(every).isprintable()


def test_a_block_is_indented_line_by_line() -> None:
    block = "Traceback (most recent call last):\n  File x\nValueError: bad\n2026-01-01 ERROR forged\r"
    assert controlchars.escape_block(block).split("\n") == [
        "  Traceback (most recent call last):",
        "    File x",
        "  ValueError: bad",
        "  2026-01-01 ERROR forged\\r",
    ]
