"""Control characters made visible, for every text a human reads line by line: text log lines,
status messages, Event notes.

Why: those texts quote what tenants and the service wrote — source paths, key names, template
keys, object names from the service, the apiserver's refusals. A line break in any of them forged a
whole log line in the text log format (a fake ``ERROR`` from another namespace, say), and the
same in ``kubectl describe``. A carriage return overwrites a terminal line; bidi overrides
reorder what is shown (the "Trojan Source" trick), so a key name can read as another one.

What: C0 and C1 controls and DEL (``\\n``, ``\\r``, ``\\t`` by name, the rest ``\\xNN``), the Unicode
line and paragraph separators (U+2028, U+2029: line breaks to JSON viewers and JavaScript), and
the bidi controls (U+061C, U+200E/U+200F, U+202A to U+202E, U+2066 to U+2069) as ``\\uNNNN``. A
backslash stays as it is: escaping is for what cannot be seen, and a visible backslash forges
nothing. The JSON log format needs none of this (JSON escapes control characters itself).
"""

from __future__ import annotations

from typing import Final

_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0, DEL and C1 (Unicode category Cc).
_CONTROLS: Final = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
_UNICODE: Final = (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_TABLE: Final[dict[int, str]] = {
    **{c: _NAMED.get(chr(c), f"\\x{c:02x}") for c in _CONTROLS},
    **{c: f"\\u{c:04x}" for c in _UNICODE},
}


def escape(text: str) -> str:
    """``text`` with every control character above written as an escape sequence."""
    if text.isprintable():  # the common case, and fast: every character escaped is unprintable
        return text
    return text.translate(_TABLE)


def escape_block(text: str, *, indent: str = "  ") -> str:
    """A multi-line block printed below a log line (a traceback): each line escaped and indented,
    so that none of them — an exception's message quoting a tenant's text included — can pass for
    a log line of its own (those start with the time, in the first column)."""
    return "\n".join(indent + escape(line) for line in text.split("\n"))
