"""What the plugin prints about ClusterSecretSyncs: their table and their ``why`` report.

Why apart from views.py: a ClusterSecretSync is read differently from a SecretSync. It is
cluster-scoped (no namespace, shown with ``status -A`` or ``status --cluster``); its state is
counts over the namespaces it selects plus the first failing ones with their reasons
(``status.failures``, at most 20), not one target; and its Events are in namespace ``default``
and name counts only (reconcile/cluster_report.py). What it shares with a SecretSync — the
identity's state and the Events table — is rendered by :func:`views.explain` over its
``syncTemplate``, so both reports stay alike.

Everything shown comes from status, spec and Events: names, reasons, counts and messages, never
a value. Who may read a ClusterSecretSync is an admin (it is never aggregated into ``edit``), so
the namespaces its status names reach no one who could not list them anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from secretferry.kubectl import reads, views

KINDS: Final = frozenset({"clustersecretsync", "clustersecretsyncs", "cssync"})
"""How ``why`` names a ClusterSecretSync: ``why clustersecretsync/NAME`` (kubectl's spellings)."""
SECRET_SYNC_KINDS: Final = frozenset({"", "secretsync", "secretsyncs", "ssync"})


def _name(body: views.Body) -> str:
    return str((body.get("metadata") or {}).get("name", ""))


def counts(body: views.Body) -> str:
    """``ready/selected`` namespaces, or ``-`` before the first count."""
    st = body.get("status") or {}
    selected, ready = st.get("selectedNamespaces"), st.get("readyNamespaces")
    if selected is None:
        return "-"
    return f"{ready or 0}/{selected}"


def _target(body: views.Body) -> str:
    template = (body.get("spec") or {}).get("syncTemplate") or {}
    target = template.get("target") or {}
    return f"{target.get('kind') or 'Secret'}/{target.get('name') or _name(body)}"


def _identity(body: views.Body) -> str:
    ref = ((body.get("spec") or {}).get("syncTemplate") or {}).get("identityRef") or {}
    return str(ref.get("name") or "")


def cluster_table(bodies: Sequence[views.Body]) -> str:
    """One row per ClusterSecretSync: Ready, reason, ready/selected namespaces, failed, identity
    (always a ClusterMachineIdentity), the target each namespace receives."""
    rows = [["CLUSTERSECRETSYNC", "READY", "REASON", "NAMESPACES", "FAILED", "IDENTITY", "TARGET"]]
    for body in sorted(bodies, key=_name):
        cond = views.ready_condition(body)
        st = body.get("status") or {}
        failed = st.get("failedNamespaces")
        rows.append(
            [
                _name(body),
                str(cond.get("status") or "Unknown"),
                str(cond.get("reason") or "-"),
                counts(body),
                "-" if failed is None else str(failed),
                f"ClusterMachineIdentity/{_identity(body)}",
                _target(body),
            ]
        )
    return views.table(rows)


def selection(body: views.Body) -> str:
    """The spec's selection in words: ``selector team=a,tier in (web); names ns-1, ns-2``."""
    spec = body.get("spec") or {}
    parts = []
    selector = spec.get("namespaceSelector")
    selector = selector if isinstance(selector, Mapping) else None  # {}: every namespace
    terms = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for expr in (selector or {}).get("matchExpressions") or []:
        values = ", ".join(str(v) for v in expr.get("values") or [])
        operator = str(expr.get("operator", ""))
        terms.append(f"{expr.get('key')} {operator}" + (f" ({values})" if values else ""))
    if selector is not None:
        parts.append("selector " + (",".join(terms) or "(every namespace)"))
    if spec.get("namespaces"):
        parts.append("names " + ", ".join(str(n) for n in spec["namespaces"]))
    return "; ".join(parts) or "-"


def explain_cluster(
    body: views.Body,
    identity: views.Body | reads.Denied,
    events: Sequence[views.Body] | reads.Denied,
    *,
    now: datetime | None = None,
    max_events: int = 10,
) -> str:
    """``why clustersecretsync/NAME``: Ready, the counts, the selection, the failing namespaces
    with their reasons and messages, then the identity and the Events as for a SecretSync."""
    moment = now or datetime.now(UTC)
    meta = body.get("metadata") or {}
    st = body.get("status") or {}
    cond = views.ready_condition(body)
    lines = [f"ClusterSecretSync {meta.get('name')}"]
    if not cond:
        lines.append("  Ready:        no condition yet (the operator has not reported on it: is it running?)")
    else:
        lines.append(
            f"  Ready:        {cond.get('status')}  reason {cond.get('reason')}"
            f"  (since {views.age(cond.get('lastTransitionTime'), now=moment)} ago)"
        )
        lines.append(f"  Message:      {cond.get('message') or '-'}")
    generation, observed = meta.get("generation"), st.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        lines.append(
            f"  Generation:   spec is at {generation}, status describes {observed} (not processed yet)"
        )
    if st.get("selectedNamespaces") is not None:
        lines.append(
            f"  Namespaces:   {st.get('selectedNamespaces')} selected,"
            f" {st.get('readyNamespaces') or 0} ready, {st.get('failedNamespaces') or 0} failing"
        )
    lines.append(f"  Selection:    {selection(body)}")
    template: Mapping[str, Any] = (body.get("spec") or {}).get("syncTemplate") or {}
    for index, scope in enumerate(views.scopes({"spec": template}), start=1):
        lines.append(f"  {'Scopes:' if index == 1 else '':<13} {index}. {scope}")
    lines.append(f"  Target:       {_target(body)} in each selected namespace")
    failures = list(st.get("failures") or [])
    total = int(st.get("failedNamespaces") or len(failures))
    if failures:
        shown = f"the first {len(failures)} of {total}, by name" if total > len(failures) else f"{total}"
        lines.append(f"Failing namespaces ({shown})")
        rows = [["NAMESPACE", "REASON", "MESSAGE"]]
        rows += [
            [str(f.get("namespace", "")), str(f.get("reason", "")), str(f.get("message", ""))]
            for f in failures
        ]
        lines.extend("  " + line for line in views.table(rows).splitlines())
    # The identity and Events sections, as a SecretSync with this syncTemplate would show them.
    shared = views.explain(
        {"metadata": {"name": meta.get("name")}, "spec": template, "status": {}},
        identity,
        events,
        now=moment,
        max_events=max_events,
    )
    # Everything after the SecretSync section (its first line that is not indented).
    tail = shared.splitlines()[1:]
    start = next((i for i, line in enumerate(tail) if line and not line.startswith(" ")), len(tail))
    lines.extend(tail[start:])
    return "\n".join(lines) + "\n"


__all__ = ["KINDS", "SECRET_SYNC_KINDS", "cluster_table", "counts", "explain_cluster", "selection"]
