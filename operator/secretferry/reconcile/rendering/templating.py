"""Rendering ``spec.target.template.data`` in a Jinja2 sandbox.

Templates are written by whoever may edit SecretSyncs, so they run in an immutable sandbox with
strict undefined values, bounded ``*``/``**``/``range()`` and an output budget counted while the
template streams. Every secret is a variable when its key is a Python identifier that shadows
nothing (``{{ DB_USER }}``), and every secret is in the ``secrets`` dict (``{{ secrets["db-user"] }}``).

Binary values (bytes that are not UTF-8 text: a decoded keystore) are never text to a template:
each is an opaque ``Binary`` in ``secrets`` and as a variable. ``b64enc`` turns one into base64
text, and a template whose whole output (whitespace around it aside) is one binary value —
``{{ KEYSTORE }}`` or ``{{ KEYSTORE_B64 | b64dec_bytes }}`` — writes its bytes. Anything that
would use one as text (``~``, ``upper``, printing it amid other text) is an error naming the
template key. How the bytes get out of Jinja, which only streams text: ``finalize`` sees every
``{{ }}`` result before it becomes text; a Binary is set aside and a placeholder printed, one
that holds a nonce drawn for this render (no value or template can know it), and the output is
those bytes exactly when it is nothing but that placeholder.

These bounds only make the common bombs fail fast. What bounds every template (CPU time, memory,
wall clock) is the worker process the operator renders in (``pool`` / ``worker``);
``render`` here is what runs inside it.

Error messages are built here from template names, key names and exception class names only:
Jinja's own messages may quote a value (``secrets[DB_PASS]`` fails with "dict object has no
attribute <the password>"), so they are never passed on.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import functools
import json
import secrets as secrets_mod
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from secretferry.reconcile.rendering import binary

SECRETS_VAR: Final = "secrets"
# A Secret holds at most 1 MiB in total: no intermediate string or list may be longer, and by
# default the rendered values of one SecretSync may not add up to more (MAX_OUTPUT_BYTES).
MAX_RENDERED_CHARS: Final = 1024 * 1024
MAX_OUTPUT_BYTES: Final = 1024 * 1024
# Integer exponents beyond this only serve to exhaust memory/CPU (2**4096 has 1234 digits).
MAX_EXPONENT: Final = 4096
# Jinja's sandbox allows range() of 100,000 items, so two nested loops run 10^10 times. No
# template that builds a secret needs more than a few hundred; 10,000 leaves room and makes the
# classic nested-range bomb fail at once instead of at the CPU limit.
MAX_RANGE: Final = 10_000

Limit = Literal["cpu", "memory", "output", "range", "timeout"]
"""Which limit a render hit: what the pool caches and what the message names."""


class TemplateRenderError(Exception):
    """A template failed. ``str(error)`` names the template key and the cause, never a value."""

    def __init__(self, key: str, message: str, *, limit: Limit | None = None) -> None:
        super().__init__(f"template {key!r}: {message}")
        self.key = key
        self.message = message
        self.limit = limit


class _FilterError(Exception):
    """Raised by our filters and globals with a message that is safe to show."""


class _RangeLimit(_FilterError):
    """range() beyond MAX_RANGE."""


def _range(*args: int) -> range:
    items = range(*args)
    if len(items) > MAX_RANGE:
        raise _RangeLimit(f"range() of more than {MAX_RANGE} items exceeds the range limit")
    return items


class Binary:
    """A value that is bytes, not text: opaque to the template (the sandbox refuses ``_data``,
    and there is no other attribute; ``bytes_of`` is for this module's Python side).

    ``__str__`` refuses, so every use as text is an error that says what to do instead; the
    template's output can still be one (module docstring)."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __str__(self) -> str:
        raise _FilterError(
            "a binary value (bytes that are not UTF-8 text) cannot be used as text: b64enc makes"
            " base64 text of it, or make it the template's whole output to write its bytes"
        )

    def __repr__(self) -> str:  # never the bytes: Jinja may put a repr into a message
        return "<binary value>"

    def __len__(self) -> int:
        return len(self._data)


def bytes_of(value: Binary) -> bytes:
    """The bytes of a binary value (never reachable from a template: not a filter or global)."""
    return value._data


def _b64enc(value: Any) -> str:
    if isinstance(value, Binary):
        return base64.b64encode(bytes_of(value)).decode()
    return base64.b64encode(str(value).encode()).decode()


def _b64dec(value: str) -> str:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except binascii.Error:
        raise _FilterError("b64dec: input is not valid base64") from None
    except UnicodeDecodeError:
        raise _FilterError(
            "b64dec: decoded bytes are not UTF-8 text (b64dec_bytes yields them as a binary value)"
        ) from None


def _b64dec_bytes(value: str, urlsafe: bool = False) -> Binary:
    """Base64 (``urlsafe=true``: base64url) text to a binary value; whitespace is ignored and
    padding optional, as for decodingStrategy Base64 (binary.py)."""
    data = binary.decode_base64(str(value), urlsafe=bool(urlsafe))
    if data is None:
        name = "base64url" if urlsafe else "base64"
        raise _FilterError(f"b64dec_bytes: input is not valid {name}")
    return Binary(data)


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


class _BinarySink:
    """The binary values one template printed (at most one may be its output), under a nonce."""

    def __init__(self, budget: int) -> None:
        self.nonce = secrets_mod.token_hex(16)
        self.values: list[bytes] = []
        self.budget = budget

    def placeholder(self, index: int) -> str:
        return f"\x00secretferry-binary:{self.nonce}:{index}\x00"

    def add(self, value: Binary) -> str:
        self.budget -= len(bytes_of(value))
        if self.budget < 0:
            raise _OutputLimit
        self.values.append(bytes_of(value))
        placeholder = self.placeholder(len(self.values) - 1)
        self.budget += len(placeholder)  # counted as output text next, but it stands for the bytes
        return placeholder


_SINK: Final[contextvars.ContextVar[_BinarySink | None]] = contextvars.ContextVar("sink", default=None)


def _finalize(value: Any) -> Any:
    """Every ``{{ }}`` result on its way to text: a Binary becomes its sink's placeholder."""
    if isinstance(value, Binary):
        sink = _SINK.get()
        if sink is None:  # constant folding at compile time: no binary value exists then
            raise _FilterError("a binary value cannot be printed here")
        return sink.add(value)
    return value


_ENV: Final = _Sandbox(
    undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize
)
_ENV.filters.update(
    b64enc=_b64enc, b64dec=_b64dec, b64dec_bytes=_b64dec_bytes, tojson=_tojson, fromjson=_fromjson
)
_ENV.globals["range"] = _range


@functools.lru_cache(maxsize=4096)  # the same templates come back every refresh cycle
def _compile(source: str) -> Any:
    return _ENV.from_string(source)


def context_for(secrets: Mapping[str, binary.Value]) -> dict[str, Any]:
    """Template variables: ``secrets`` plus every key usable as a name that shadows no global;
    a value that is bytes is a ``Binary`` in both."""
    values = {key: Binary(v) if isinstance(v, bytes) else v for key, v in secrets.items()}
    context: dict[str, Any] = {
        key: value
        for key, value in values.items()
        if key.isidentifier() and key != SECRETS_VAR and key not in _ENV.globals
    }
    context[SECRETS_VAR] = values
    return context


def render(
    templates: Mapping[str, str],
    secrets: Mapping[str, binary.Value],
    *,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    on_key: Callable[[str], None] | None = None,
) -> dict[str, binary.Value]:
    """Render every template (target key -> Jinja2 source) against the fetched secrets.

    ``max_output_bytes`` bounds the size of all rendered values together (UTF-8 text and binary
    values, counted while each template streams, so a loop that prints forever stops at the
    budget, not at the end). A value is bytes when the template's output is one binary value
    whose bytes are not UTF-8 text (``binary.normalize``).
    ``on_key`` is told each key before it renders (the worker reports progress with it).
    In-process and unbounded in CPU and memory: the operator calls this inside a worker process
    (``pool``), never on its event loop.
    """
    context = context_for(secrets)
    rendered: dict[str, binary.Value] = {}
    budget = max_output_bytes
    for key, source in templates.items():
        if on_key is not None:
            on_key(key)
        value = _render_one(key, source, context, budget=budget, limit_bytes=max_output_bytes)
        size = len(value) if isinstance(value, bytes) else _utf8_size(value)
        if size is None:  # "\ud800" in a template: no Secret or ConfigMap can hold it
            raise TemplateRenderError(key, "output is not valid Unicode text (an unpaired surrogate)")
        budget -= size
        if budget < 0:
            raise TemplateRenderError(key, _output_message(max_output_bytes), limit="output")
        rendered[key] = value
    return rendered


def _utf8_size(value: str) -> int | None:
    try:
        return len(value.encode())
    except UnicodeEncodeError:
        return None


def _output_message(limit_bytes: int) -> str:
    return f"output exceeds the size limit of {limit_bytes} bytes"


def _render_one(
    key: str, source: str, context: Mapping[str, Any], *, budget: int, limit_bytes: int
) -> binary.Value:
    # Errors are raised outside the ``except`` blocks so that no exception chain (__context__)
    # keeps Jinja's original message, which may quote a value, reachable from ours.
    result = _try_render(source, context, budget=budget)
    if isinstance(result, _Failure):
        if result.limit == "output":
            raise TemplateRenderError(key, _output_message(limit_bytes), limit="output")
        raise TemplateRenderError(key, result.message, limit=result.limit)
    return result


class _Failure:
    __slots__ = ("limit", "message")

    def __init__(self, message: str, limit: Limit | None = None) -> None:
        self.message = message
        self.limit = limit


def _try_render(source: str, context: Mapping[str, Any], *, budget: int) -> binary.Value | _Failure:
    """The rendered text, or a safe description of why it failed.

    MemoryError is not caught: inside the worker it means the memory limit was hit, and the
    worker reports that itself.
    """
    try:
        template = _compile(source)
    except TemplateSyntaxError as exc:
        # exc.message describes the template source (spec, not secret data).
        return _Failure(f"syntax error on line {exc.lineno}: {exc.message}")
    try:
        return _stream(template, context, budget=budget)
    except _OutputLimit:
        return _Failure("", limit="output")
    except MemoryError:
        raise
    except UndefinedError:
        return _Failure(_describe_undefined(source, context))
    except SecurityError:
        return _Failure("operation not allowed in the sandbox")
    except _RangeLimit as exc:
        return _Failure(str(exc), limit="range")
    except _FilterError as exc:
        return _Failure(str(exc))
    except Exception as exc:  # anything else: the class name only, the message may hold a value
        return _Failure(f"rendering failed ({type(exc).__name__})")


class _OutputLimit(Exception):
    pass


def _stream(template: Any, context: Mapping[str, Any], *, budget: int) -> binary.Value | _Failure:
    """``template.render`` (the same text), stopping as soon as the output is over ``budget``;
    or the bytes of the one binary value that is the whole output (module docstring).

    Counted in characters while streaming (a character is at least one byte) plus the size of
    every binary value printed, in bytes by the caller at the end.
    """
    chunks: list[str] = []
    sink = _BinarySink(budget)
    token = _SINK.set(sink)
    try:
        for chunk in template.generate(context):
            sink.budget -= len(chunk)
            if sink.budget < 0:
                raise _OutputLimit
            chunks.append(chunk)
    finally:
        _SINK.reset(token)
    text = "".join(chunks)
    if not sink.values:
        return text
    if len(sink.values) == 1 and text.strip() == sink.placeholder(0):
        return binary.normalize(sink.values[0])
    return _Failure(
        "a binary value (b64dec_bytes, or a secret that is not UTF-8 text) must be the template's"
        " whole output, whitespace around it aside; b64enc embeds one in text as base64"
    )


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
