"""What the plugin prints, from raw object bodies: pure functions, table-tested.

Bodies are read as dicts, not parsed into the models: a SecretSync whose spec the operator
refuses (InvalidSpec) is exactly one a user wants to see, and a model would refuse it too. Every
field shown is a name, a reason, a time or a message from status or an Event; none is a value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from secretferry.kubectl import reads

Body = Mapping[str, Any]
# Streams listed under the identity in ``why``: its SecretSync's own are shown under its sources.
_MAX_STREAM_LINES = 5


def ready_condition(body: Body) -> Mapping[str, Any]:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond
    return {}


def age(stamp: Any, *, now: datetime) -> str:
    """kubectl's short age (``45s``, ``12m``, ``5h``, ``3d``) of an RFC 3339 time; ``-`` if none."""
    if not stamp:
        return "-"
    try:
        then = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(0, int((now - then).total_seconds()))
    # Each unit from twice the next one up, so that "90s" is not "1m" (kubectl's HumanDuration).
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def identity_of(body: Body) -> tuple[str, str]:
    """(kind, name) of the identity a SecretSync names."""
    ref = (body.get("spec") or {}).get("identityRef") or {}
    return str(ref.get("kind") or "MachineIdentity"), str(ref.get("name") or "")


def _identity_text(body: Body) -> str:
    kind, name = identity_of(body)
    return f"ClusterMachineIdentity/{name}" if kind == "ClusterMachineIdentity" else name


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, three spaces apart, as kubectl prints them."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return (
        "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
        + "\n"
    )


def status_table(syncs: Sequence[Body], *, all_namespaces: bool, now: datetime | None = None) -> str:
    """One row per SecretSync: ready, reason, update mode, identity, last sync, target."""
    moment = now or datetime.now(UTC)
    header = ["NAME", "READY", "REASON", "MODE", "IDENTITY", "LAST SYNC", "TARGET"]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    rows = [header]
    ordered = sorted(syncs, key=lambda b: ((b.get("metadata") or {}).get("namespace", ""), _name(b)))
    for body in ordered:
        meta = body.get("metadata") or {}
        st = body.get("status") or {}
        cond = ready_condition(body)
        spec_target = (body.get("spec") or {}).get("target") or {}
        target = st.get("target") or {
            "kind": spec_target.get("kind", "Secret"),
            "name": spec_target.get("name") or _name(body),
        }
        row = [
            _name(body),
            str(cond.get("status") or "Unknown"),
            str(cond.get("reason") or "-"),
            str(st.get("updateMode") or "-"),
            _identity_text(body),
            age(st.get("lastSyncTime"), now=moment),
            f"{target.get('kind', 'Secret')}/{target.get('name', '')}",
        ]
        if all_namespaces:
            row.insert(0, str(meta.get("namespace", "")))
        rows.append(row)
    return table(rows)


def scopes(body: Body) -> list[str]:
    """Each source as the operator names its scope in messages (``project … environment … path …``),
    or the generator it reads."""
    found = []
    for source in (body.get("spec") or {}).get("sources") or []:
        generator = source.get("generatorRef")
        if generator:
            found.append(f"{generator.get('kind')}/{generator.get('name')} (no service call)")
            continue
        project = source.get("projectSlug") or source.get("projectId")
        text = f"project {project} environment {source.get('environment')} path {source.get('path', '/')}"
        found.append(text + (" (recursive)" if source.get("recursive") else ""))
    return found


def _norm_path(path: Any) -> str:
    """``a/b/`` → ``/a/b`` (the operator's normalization of a source path, service.scopes)."""
    return "/" + "/".join(part for part in str(path or "/").split("/") if part)


def scope_entries(source: Body, identity_status: Body) -> list[Body]:
    """The entries of the identity's ``status.scopes`` a source reads: same project (by id, or by
    the slug it was looked up with), environment, path and recursion. Several when filters split
    one path into several scopes."""
    found: list[Body] = []
    for entry in identity_status.get("scopes") or []:
        if not isinstance(entry, Mapping):
            continue
        if source.get("projectId"):
            project = entry.get("projectId") == source.get("projectId")
        else:
            slug = source.get("projectSlug")
            project = slug is not None and entry.get("projectSlug") == slug
        if (
            project
            and entry.get("environment") == source.get("environment")
            and entry.get("path") == _norm_path(source.get("path"))
            and bool(entry.get("recursive")) == bool(source.get("recursive"))
        ):
            found.append(entry)
    return found


def _stream_of(project_id: Any, identity_status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for stream in identity_status.get("streams") or []:
        if isinstance(stream, Mapping) and stream.get("projectId") == project_id:
            return stream
    return None


def _stream_text(stream: Mapping[str, Any], *, now: datetime) -> str:
    text = f"{stream.get('state')} for {age(stream.get('since'), now=now)}"
    if stream.get("state") != "Open" and stream.get("message"):
        text += f" ({stream.get('message')})"
    last_event = stream.get("lastEventTime")
    return text + (f", last event {age(last_event, now=now)} ago" if last_event else ", no event yet")


def source_lines(sync: Body, identity: Body | reads.Denied, *, now: datetime) -> list[str]:
    """Under each source of ``why``: its scope's last list and its project's stream, from the
    identity's status (written by the operator at most every 30 s; README "Identity status")."""
    sources = [s for s in (sync.get("spec") or {}).get("sources") or [] if isinstance(s, Mapping)]
    lines: list[str] = []
    pad = " " * 19  # under the scope's text
    for index, (text, source) in enumerate(zip(scopes(sync), sources, strict=False), start=1):
        lines.append(f"  {'Scopes:' if index == 1 else '':<13} {index}. {text}")
        if source.get("generatorRef"):
            continue
        if isinstance(identity, reads.Denied):
            lines.append(f"{pad}last list, stream: not shown (the identity cannot be read)")
            continue
        ist = identity.get("status") or {}
        entries = scope_entries(source, ist)
        if not entries:
            omitted = ist.get("scopesOmitted") or 0
            if omitted:
                why = f"not among the scopes the identity's status lists ({omitted} omitted)"
            elif "scopes" not in ist:
                why = "the identity's status lists no scopes yet (written every 30 s)"
            else:
                why = "not in the identity's status yet (written every 30 s; OnChange/CreatedOnce not listed)"
            lines.append(f"{pad}last list: {why}")
            continue
        for entry in entries:
            listed = entry.get("lastListTime")
            result = entry.get("lastListResult") or "-"
            where = " (filtered)" if entry.get("filtered") and len(entries) > 1 else ""
            lines.append(
                f"{pad}last list{where}: "
                + (f"{age(listed, now=now)} ago, {result}" if listed else "not listed yet")
                + f"; {entry.get('secretSyncs', 0)} SecretSync(s) read this scope"
            )
        stream = _stream_of(entries[0].get("projectId"), ist)
        lines.append(
            f"{pad}stream:    "
            + (
                _stream_text(stream, now=now)
                if stream
                else "none (instant updates off for this scope, or not planned yet)"
            )
        )
    return lines


def _name(body: Body) -> str:
    return str((body.get("metadata") or {}).get("name", ""))


def explain(
    sync: Body,
    identity: Body | reads.Denied,
    events: Sequence[Body] | reads.Denied,
    *,
    now: datetime | None = None,
    max_events: int = 10,
) -> str:
    """``why``: the Ready condition, the spec generation it describes, the update mode (stream or
    polling, and why), the identity's state, and the object's recent Events."""
    moment = now or datetime.now(UTC)
    meta = sync.get("metadata") or {}
    st = sync.get("status") or {}
    cond = ready_condition(sync)
    lines = [f"SecretSync {meta.get('namespace')}/{meta.get('name')}"]
    if not cond:
        lines.append(
            "  Ready:        no condition yet (the operator has not reported on it: is it running and"
        )
        lines.append(
            "                serving this namespace? see `kubectl get pods -n <operator namespace>`)"
        )
    else:
        lines.append(
            f"  Ready:        {cond.get('status')}  reason {cond.get('reason')}"
            f"  (since {age(cond.get('lastTransitionTime'), now=moment)} ago)"
        )
        lines.append(f"  Message:      {cond.get('message') or '-'}")
    generation, observed = meta.get("generation"), st.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        lines.append(
            f"  Generation:   spec is at {generation}, status describes {observed} (not processed yet)"
        )
    mode, mode_reason = st.get("updateMode"), st.get("updateModeReason")
    if mode:
        lines.append(f"  Update mode:  {mode}" + (f" ({mode_reason})" if mode_reason else ""))
    else:
        lines.append("  Update mode:  - (reported by the first pass that gets past the identity)")
    # One event stream and one list call serve each scope (project, environment, path), shared by
    # every SecretSync reading it: what Streaming/Polling above is about. The identity's status says
    # when each was last listed and what its project's stream does.
    lines.extend(source_lines(sync, identity, now=moment))
    lines.append(
        f"  Last sync:    {age(st.get('lastSyncTime'), now=moment)} ago"
        if st.get("lastSyncTime")
        else "  Last sync:    never"
    )
    target = st.get("target") or {}
    if target:
        lines.append(
            f"  Target:       {target.get('kind')}/{target.get('name')} ({st.get('syncedKeyCount', 0)} keys)"
        )
    kind, name = identity_of(sync)
    lines.append(f"Identity {kind}/{name}")
    if isinstance(identity, reads.Denied):
        lines.append(f"  {identity}")
    else:
        icond = ready_condition(identity)
        ist = identity.get("status") or {}
        if icond:
            lines.append(f"  Ready:        {icond.get('status')}  reason {icond.get('reason')}")
            lines.append(f"  Message:      {icond.get('message') or '-'}")
        else:
            lines.append("  Ready:        no condition yet")
        lines.append(
            f"  Last login:   {age(ist.get('lastLoginTime'), now=moment)} ago"
            if ist.get("lastLoginTime")
            else "  Last login:   never"
        )
        if ist.get("listEndpoint"):
            lines.append(f"  List route:   {ist.get('listEndpoint')}")
        if "streams" in ist:
            streams = [s for s in ist.get("streams") or [] if isinstance(s, Mapping)]
            lines.append(f"  Streams:      {ist.get('streamsOpen', 0)} open of {len(streams)}")
            for stream in streams[:_MAX_STREAM_LINES]:
                text = _stream_text(stream, now=moment)
                lines.append(f"                project {stream.get('projectId')}: {text}")
            if len(streams) > _MAX_STREAM_LINES:
                lines.append(f"                ... and {len(streams) - _MAX_STREAM_LINES} more")
        if "scopeCount" in ist:
            lines.append(f"  Scopes:       {ist.get('scopeCount', 0)} listed by this identity")
    lines.append("Events")
    if isinstance(events, reads.Denied):
        lines.append(f"  {events}")
    elif not events:
        lines.append(
            "  none (Events expire after an hour by default; a SecretSync Ready since then has none)"
        )
    else:
        rows = [["LAST SEEN", "TYPE", "REASON", "COUNT", "MESSAGE"]]
        for event in list(events)[-max_events:]:
            count = (event.get("series") or {}).get("count") or event.get("count") or 1
            rows.append(
                [
                    age(reads.event_time(dict(event)), now=moment),
                    str(event.get("type", "")),
                    str(event.get("reason", "")),
                    str(count),
                    str(event.get("message") or event.get("note") or ""),
                ]
            )
        lines.extend("  " + line for line in table(rows).splitlines())
    return "\n".join(lines) + "\n"
