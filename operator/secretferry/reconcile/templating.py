"""Rendering ``spec.target.template.data`` in a Jinja2 sandbox.

Templates are written by whoever may edit SecretSyncs, so they run in an immutable sandbox with
strict undefined values and bounded ``*``/``**``. Every secret is a variable when its key is a
Python identifier that shadows nothing (``{{ DB_USER }}``), and every secret is in the ``secrets``
dict (``{{ secrets["db-user"] }}``).

Error messages are built here from template names, key names and exception class names only:
Jinja's own messages may quote a value (``secrets[DB_PASS]`` fails with "dict object has no
attribute <the password>"), so they are never passed on.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from typing import Any, Final

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

SECRETS_VAR: Final = "secrets"
# A Secret holds at most 1 MiB in total; no single rendered value may be larger.
MAX_RENDERED_CHARS: Final = 1024 * 1024
# Integer exponents beyond this only serve to exhaust memory/CPU (2**4096 has 1234 digits).
MAX_EXPONENT: Final = 4096


class TemplateRenderError(Exception):
    """A template failed. ``str(error)`` names the template key and the cause, never a value."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"template {key!r}: {message}")
        self.key = key


class _FilterError(Exception):
    """Raised by our filters with a message that is safe to show."""


def _b64enc(value: str) -> str:
    return base64.b64encode(str(value).encode()).decode()


def _b64dec(value: str) -> str:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except binascii.Error:
        raise _FilterError("b64dec: input is not valid base64") from None
    except UnicodeDecodeError:
        raise _FilterError("b64dec: decoded bytes are not UTF-8 text") from None


def _tojson(value: Any, indent: int | None = None) -> str:
    # Jinja's builtin tojson HTML-escapes <, >, & and ' for embedding in pages; secrets want raw JSON.
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False)
    except (TypeError, ValueError):
        raise _FilterError("tojson: value is not JSON-serialisable") from None


def _fromjson(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        raise _FilterError("fromjson: input is not valid JSON") from None


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, plus bounds on the two operators that can allocate without limit."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            if isinstance(right, int) and abs(right) > MAX_EXPONENT:
                raise SecurityError("exponent too large")
            return left**right
        for seq, times in ((left, right), (right, left)):
            sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
            if sized and len(seq) * times > MAX_RENDERED_CHARS:
                raise SecurityError("repetition too large")
        return left * right


_ENV: Final = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters.update(b64enc=_b64enc, b64dec=_b64dec, tojson=_tojson, fromjson=_fromjson)


@functools.lru_cache(maxsize=4096)  # the same templates come back every refresh cycle
def _compile(source: str) -> Any:
    return _ENV.from_string(source)


def context_for(secrets: Mapping[str, str]) -> dict[str, Any]:
    """Template variables: ``secrets`` plus every key usable as a name that shadows no global."""
    context: dict[str, Any] = {
        key: value
        for key, value in secrets.items()
        if key.isidentifier() and key != SECRETS_VAR and key not in _ENV.globals
    }
    context[SECRETS_VAR] = dict(secrets)
    return context


def render(templates: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """Render every template (target key -> Jinja2 source) against the fetched secrets."""
    context = context_for(secrets)
    return {key: _render_one(key, source, context) for key, source in templates.items()}


def _render_one(key: str, source: str, context: Mapping[str, Any]) -> str:
    # Errors are raised outside the ``except`` blocks so that no exception chain (__context__)
    # keeps Jinja's original message, which may quote a value, reachable from ours.
    failure = _try_render(source, context)
    if isinstance(failure, _Failure):
        raise TemplateRenderError(key, failure.message)
    if len(failure) > MAX_RENDERED_CHARS:
        raise TemplateRenderError(key, f"result exceeds {MAX_RENDERED_CHARS} characters")
    return failure


class _Failure:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _try_render(source: str, context: Mapping[str, Any]) -> str | _Failure:
    """The rendered text, or a safe description of why it failed."""
    try:
        template = _compile(source)
    except TemplateSyntaxError as exc:
        # exc.message describes the template source (spec, not secret data).
        return _Failure(f"syntax error on line {exc.lineno}: {exc.message}")
    try:
        return str(template.render(context))
    except UndefinedError:
        return _Failure(_describe_undefined(source, context))
    except SecurityError:
        return _Failure("operation not allowed in the sandbox")
    except _FilterError as exc:
        return _Failure(str(exc))
    except Exception as exc:  # anything else: the class name only, the message may hold a value
        return _Failure(f"rendering failed ({type(exc).__name__})")


def _describe_undefined(source: str, context: Mapping[str, Any]) -> str:
    """Name the missing keys the template spells out; say nothing about computed lookups."""
    ast = _ENV.parse(source)
    missing = {name for name in meta.find_undeclared_variables(ast) if name not in context}
    missing -= set(_ENV.globals)
    secrets = context.get(SECRETS_VAR, {})
    for item in ast.find_all(nodes.Getitem):
        name = _const_str(item.arg) if _is_secrets(item.node) else None
        if name is not None and name not in secrets:
            missing.add(name)
    for attr in ast.find_all(nodes.Getattr):
        # secrets.get(...) and other dict methods are not lookups of a key.
        if _is_secrets(attr.node) and not hasattr(dict, attr.attr) and attr.attr not in secrets:
            missing.add(attr.attr)
    if missing:
        return f"refers to keys that were not fetched: {', '.join(sorted(missing))}"
    return "used an undefined value (a missing key, attribute or item computed at render time)"


def _const_str(node: nodes.Node) -> str | None:
    return node.value if isinstance(node, nodes.Const) and isinstance(node.value, str) else None


def _is_secrets(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == SECRETS_VAR
