"""Values that are text or bytes, and base64 decoding by strategy (pure, no I/O, no secrets shown).

A value of a target is text (``str``) almost always; it is ``bytes`` only when it is not UTF-8
text (a decoded keystore, a DER certificate). ``normalize`` keeps that invariant: decoded bytes
that are UTF-8 become ``str``, so a base64-stored PEM file is text to a template and to a
ConfigMap, and every pipeline that only knows text (status, HMAC, drift) sees exactly what it saw
before binary values existed. A Secret stores bytes either way, so ``as_bytes`` of a value is
what the Secret holds.

How each strategy decides (the README, "Binary values", says the same):

- ``Base64``: the standard alphabet (``A-Z a-z 0-9 + /``). ASCII whitespace (space, tab, CR, LF)
  anywhere is ignored, as ``base64 -d`` does, so line-wrapped output of ``base64 file`` works.
  Padding (``=``) is optional; if present it must be right. Any other character, a length of
  4n+1 data characters, or padding in the middle: not valid (DecodingFailed).
- ``Base64URL``: the same with the URL alphabet (``-`` and ``_`` instead of ``+`` and ``/``).
- ``Auto``: a value is decoded only when it is, exactly as stored (no whitespace, nothing
  ignored), the canonical padded encoding of some bytes: its length a multiple of 4 (padding
  included, as ESO's Auto requires: Go's StdEncoding, then URLEncoding), first in the standard
  alphabet, else in the URL alphabet. Canonical: encoding the decoded bytes again gives back
  the value character for character (the unused low bits of the last character are zero).
  Anything else, and the empty value, is kept as it is; Auto never fails. Caveat, as with ESO's
  Auto: a plain value can look like base64 — ``test``, ``password`` or any word of 4n letters
  and digits is canonical base64 and would be decoded. Use Auto only for sources whose values
  are all either base64 or clearly not; prefer Base64 for the keys that need it (``decoding``
  rules). Unpadded base64url (JWT parts) is never taken by Auto: Base64URL decodes it.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final, Literal

Value = str | bytes
"""A target value: text, or bytes that are not UTF-8 text (see ``normalize``)."""

Strategy = Literal["None", "Base64", "Base64URL", "Auto"]

_WHITESPACE: Final = str.maketrans("", "", " \t\r\n")
# Plain character classes, one quantifier each: linear-time matches, whatever the value.
_STANDARD: Final = re.compile(r"[A-Za-z0-9+/]*")
_URLSAFE: Final = re.compile(r"[A-Za-z0-9_-]*")
_URL_ALTCHARS: Final = b"-_"


def normalize(data: bytes) -> Value:
    """``data`` as text when it is UTF-8, else the bytes themselves."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def as_bytes(value: Value) -> bytes:
    """What a Secret holds for ``value``: its UTF-8 encoding, or the bytes themselves."""
    return value if isinstance(value, bytes) else value.encode()


def decode_base64(text: str, *, urlsafe: bool) -> bytes | None:
    """The bytes ``text`` encodes (Base64 / Base64URL rules above), or None when it is not valid."""
    compact = text.translate(_WHITESPACE)
    body = compact.rstrip("=")
    padding = len(compact) - len(body)
    alphabet = _URLSAFE if urlsafe else _STANDARD
    if alphabet.fullmatch(body) is None or len(body) % 4 == 1 or padding > 2:
        return None
    if padding and len(compact) % 4 != 0:
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        return base64.b64decode(padded, altchars=_URL_ALTCHARS if urlsafe else None, validate=True)
    except binascii.Error:  # unreachable after the checks above; kept as the last word
        return None


def decode_auto(text: str) -> bytes | None:
    """The bytes ``text`` canonically encodes (Auto rules above), or None: keep it as it is."""
    if not text or len(text) % 4 != 0:
        return None
    data = decode_base64(text, urlsafe=False)
    if data is not None and base64.b64encode(data).decode() == text:
        return data
    data = decode_base64(text, urlsafe=True)
    if data is not None and base64.urlsafe_b64encode(data).decode() == text:
        return data
    return None


def decode(text: str, strategy: Strategy) -> Value | None:
    """``text`` decoded under ``strategy`` (normalized), or None when an explicit strategy
    (Base64, Base64URL) finds it invalid. None and Auto never fail."""
    if strategy == "None":
        return text
    if strategy == "Auto":
        data = decode_auto(text)
        return text if data is None else normalize(data)
    data = decode_base64(text, urlsafe=strategy == "Base64URL")
    return None if data is None else normalize(data)
