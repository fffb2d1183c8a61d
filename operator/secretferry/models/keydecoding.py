"""Decoding of a source's values (``decodingStrategy``, ``decoding``): binary secrets stored as base64.

Keystores, PKCS#12 bundles and DER certificates are kept at the service as base64 text; a pod wants
the bytes. A source says how its values are decoded (``decodingStrategy``), and may say it per key
with ordered glob rules (``decoding``, first match wins). reconcile/rendering/decoding.py applies
them, after key rewriting and before templates.

Why the globs cannot be made slow, whatever a tenant writes:

- they are matched with Python's ``fnmatch`` (the syntax of includeKeys/excludeKeys). Its
  translation to a regular expression (bpo-40480, Python 3.9+; on 3.11 ``*a*b`` becomes
  ``(?>.*?a).*b``) puts every ``*`` but the last in an atomic group: it matches its shortest
  extent once and is never backtracked into, so no two stars retry each other's splits. A
  match costs O(key length x pattern length) steps whatever the pattern: no ``(a*)*``-style
  blow-up, ``*a*a*a…*b`` against ``aaa…a`` fails in one pass;
- a glob is at most ``MAX_GLOB`` (253, a key's own limit) characters, a source has at most
  ``MAX_RULES`` rules, and keys longer than a data key (253) are never matched (they cannot be
  written anyway: InvalidKey). So one key costs at most 32 x 253 x 253 steps of the C regex engine
  (tests/unit/reconcile/test_decoding.py times hostile globs against the longest key).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from secretferry.models import base

DecodingStrategy = Literal["None", "Base64", "Base64URL", "Auto"]

# Rules per source: one per kind of file is plenty (keystores, certificates, keys), 32 is generous.
MAX_RULES: Final = 32
# The same limit as a data key (DATA_KEY_MAX in secretsync.py): a glob never needs more.
MAX_GLOB: Final = 253


class DecodingRule(base.CRModel):
    """How the values of the keys matching one glob are decoded; the first matching rule wins."""

    keys: str = Field(min_length=1, max_length=MAX_GLOB)
    """A key glob, e.g. ``*.p12``, matched against the key as the source's rewrite rules left it
    (the target key). The syntax of includeKeys: ``*`` any characters, ``?`` one, ``[abc]`` /
    ``[!abc]`` a set; matched case-sensitively against the whole key."""
    strategy: DecodingStrategy
    """``None`` (write the value as it is), ``Base64``, ``Base64URL`` or ``Auto``, as for
    decodingStrategy."""
