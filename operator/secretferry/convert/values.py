"""Single values in Infisical's spelling turned into ours: URLs, intervals, templates, names.

Templates: Infisical renders Go templates over a map of key -> {Value, SecretPath}; ours are Jinja
in a sandbox where a fetched secret is a variable (``{{ DB_USER }}``) when its key is a name that
shadows nothing, and always ``secrets["key"]`` (reconcile/rendering/templating.py). The lookups of a value,
``{{ .KEY.Value }}`` and ``{{ (index . "key").Value }}``, convert exactly, with Go's ``{{-``/``-}}``
trimming as Jinja's; anything else (functions, pipelines, ``.SecretPath``, conditions, loops) is
reported, because a guess would render something else without saying so.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping
from typing import Final

import jinja2
import jinja2.defaults

from secretferry.models import labels, reserved

# internal/util/time.go: a v1beta1 interval is a whole number and one of these units.
_INTERVAL: Final = re.compile(r"([0-9]+)([smhdw])")
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 24 * 3600, "w": 7 * 24 * 3600}

# Names a template cannot use for a secret: Jinja's literals, globals and names with a meaning in
# a template, Python's keywords (below), and our ``secrets`` dict.
_NOT_A_VARIABLE: Final = frozenset(
    ("true", "false", "none", "True", "False", "None", "secrets", "loop", "self", "super", "caller")
) | frozenset(("varargs", "kwargs", *jinja2.defaults.DEFAULT_NAMESPACE))
# A Go action; "{{- " and " -}}" trim white space (the space is part of the marker in Go).
_ACTION: Final = re.compile(r"\{\{(-\s)?\s*(.*?)\s*(\s-)?\}\}", re.DOTALL)
_FIELD_VALUE: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)\.Value")
_INDEX_VALUE: Final = re.compile(r'\(\s*index\s+\.\s+"([^"\\]+)"\s*\)\.Value')
# Infisical's ``decodeBase64ToBytes`` on a value, as a pipeline or a call: the value's action inside.
_DECODE: Final = re.compile(
    r"(?P<piped>.+?)\s*\|\s*decodeBase64ToBytes|decodeBase64ToBytes\s+(?:\(\s*(?P<paren>.+?)\s*\)|(?P<arg>.+))",
    re.DOTALL,
)
_JINJA: Final = jinja2.Environment(keep_trailing_newline=True)  # parses only, renders nothing

# Not copied onto a target: Infisical's reconciler skips the system prefixes itself; its own
# annotations and ours are instructions to an operator, not metadata of the Secret.
_NOT_COPIED: Final = (
    "kubectl.kubernetes.io/",
    "kubernetes.io/",
    "k8s.io/",
    "helm.sh/",
    "secrets.infisical.com/",
    "secretferry.io/",
)


def host_api(url: str) -> str:
    """Infisical's hostAPI ends in ``/api``; ours is the base URL that ``/api/...`` paths go under."""
    url = url.strip().rstrip("/")
    return url.removesuffix("/api")


def duration(seconds: int) -> str:
    """Whole seconds as our duration: 90 -> ``1m30s``, 86400 -> ``24h``."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)


def interval_seconds(text: str) -> int | None:
    """A v1beta1 ``refreshInterval`` such as ``60s`` or ``1d`` in seconds; None when it is not one."""
    match = _INTERVAL.fullmatch(text.strip())
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else None


def jinja_name(key: str) -> str:
    """The Jinja expression for a fetched secret: its variable when it has one, else ``secrets[...]``."""
    if key.isidentifier() and not keyword.iskeyword(key) and key not in _NOT_A_VARIABLE:
        return key
    return f"secrets[{json.dumps(key, ensure_ascii=False)}]"


def go_template_to_jinja(source: str) -> tuple[str | None, str | None]:
    """``(Jinja source, None)``, or ``(None, why not)``. The reason names no part of the template."""
    parts: list[str | None] = []
    pos = 0
    for number, action in enumerate(_ACTION.finditer(source), start=1):
        parts.append(_literal(source[pos : action.start()]))
        lead, expr, trail = action.groups()
        decode = _DECODE.fullmatch(expr)
        value_expr = expr
        if decode:
            value_expr = decode.group("piped") or decode.group("paren") or decode.group("arg")
        match = _FIELD_VALUE.fullmatch(value_expr) or _INDEX_VALUE.fullmatch(value_expr)
        if match is None:
            return None, (
                f"action {number} is not of the form {{{{ .KEY.Value }}}} or {{{{ .KEY.Value |"
                " decodeBase64ToBytes }} (other Go template functions, pipelines, .SecretPath,"
                " conditions and loops have no converted form)"
            )
        open_, close = "{{-" if lead else "{{", "-}}" if trail else "}}"
        name = jinja_name(match.group(1))
        if decode:
            # Alone in its template, the bytes are the value (binary values, rendering/binary.py);
            # amid text, Go prints the decoded bytes as text, which is what our b64dec does
            # (and refuses, naming the key, when they are not UTF-8).
            alone = not source[: action.start()].strip() and not source[action.end() :].strip()
            name = f"{name} | {'b64dec_bytes' if alone else 'b64dec'}"
        parts.append(f"{open_} {name} {close}")
        pos = action.end()
    parts.append(_literal(source[pos:]))
    if any(part is None for part in parts):
        return None, "its text holds an unterminated {{, or Jinja delimiters next to the word endraw"
    text = "".join(part for part in parts if part is not None)
    try:
        _JINJA.parse(text)
    except jinja2.TemplateSyntaxError:
        return None, "its converted form is not a valid Jinja template"
    return text, None


def _literal(text: str) -> str | None:
    """Go template text as Jinja text, raw where Jinja would see a delimiter; None if it can't be."""
    if "{{" in text:
        return None  # an unterminated action, which Go refuses too
    if "{%" in text or "{#" in text:
        return None if "endraw" in text else f"{{% raw %}}{text}{{% endraw %}}"
    return text


def glob_escape(name: str) -> str:
    """A literal key as one of our includeKeys globs (fnmatch): ``[*]`` for ``*``, and so on."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def folder(path: str) -> str:
    """Infisical's secretsPath as our source path, which starts with ``/``."""
    path = path.strip() or "/"
    return path if path.startswith("/") else f"/{path}"


def object_id(kind: str, namespace: str | None, name: str) -> str:
    """How notes name an object: ``Kind/namespace/name``, or ``Kind/name`` without a namespace."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def copied_labels(values: Mapping[str, str]) -> dict[str, str]:
    """Labels Infisical copies from its object onto the managed one, less ours (we set those) and
    those another controller acts on (an InfisicalSecret installed by Helm or Argo CD carries
    theirs; a SecretSync may not ask for them: models/reserved.py)."""
    return {
        k: v
        for k, v in values.items()
        if not k.startswith("secretferry.io/")
        and k != labels.MANAGED_BY_LABEL
        and reserved.label_reader(k, v) is None
    }


def copied_annotations(values: Mapping[str, str]) -> dict[str, str]:
    """Annotations Infisical copies from its object onto the managed one, less those another
    controller acts on (models/reserved.py)."""
    return {
        k: v for k, v in values.items() if not k.startswith(_NOT_COPIED) and reserved.key_reader(k) is None
    }
