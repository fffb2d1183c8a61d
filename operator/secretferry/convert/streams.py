"""Reading the manifests and printing the result: YAML in, YAML and comment lines out.

Error messages name files, lines and columns only: PyYAML's own message quotes the offending
line, which may hold a Secret's value.
"""

from __future__ import annotations

from typing import Any

import yaml

from secretferry.convert import results


def load_documents(text: str, *, source: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream, ``kind: List`` expanded; raises InputError."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise results.InputError(f"{source}: not valid YAML{where}") from None
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document, e.g. after a trailing ---
        is_list = isinstance(document, dict) and document.get("kind") == "List"
        items = (document.get("items") or []) if is_list else [document]
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise results.InputError(f"{source}: document {number} is not an object (or a List of them)")
        objects += items
    return objects


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (templates) as ``|`` blocks rather than escaped one-liners."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _represent_str)


def _comment(text: str) -> str:
    return "# " + " ".join(text.split())  # one line, whatever the input's names hold


def render(result: results.Result) -> str:
    """The YAML stream: identities, then SecretSyncs, each under comments on where it comes from.

    Notes about objects nothing was printed for head the stream; every other note heads the
    objects converted from the object it is about.
    """
    covered = {origin for m in result.manifests for origin in m.origins}
    head = [
        _comment("Converted by `secretferry convert` from Infisical operator manifests; review it first.")
    ]
    head += [_comment(str(note)) for note in result.notes if note.object not in covered]
    documents = ["\n".join(head) + "\n"]
    for manifest in result.manifests:
        lines = [_comment(f"from {', '.join(manifest.origins)}"), *map(_comment, manifest.comments)]
        lines += [_comment(str(note)) for note in result.notes if note.object in manifest.origins]
        dumped = yaml.dump(manifest.body, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)
        documents.append("\n".join(lines) + "\n" + dumped)
    return "---\n".join(documents)


def messages(result: results.Result) -> list[str]:
    """The stderr lines: every note, what was skipped unread, then the steps to take, in order."""
    out = [_comment(str(note)) for note in result.notes]
    out += [
        _comment(f"skipped: {obj} (not an Infisical operator object; not read)") for obj in result.skipped
    ]
    out += [_comment(f"to do: {step}") for step in result.steps]
    return out
