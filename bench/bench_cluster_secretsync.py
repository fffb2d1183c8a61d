"""Issue 22: one ClusterSecretSync over N namespaces against N ordinary SecretSyncs beside it.

On a fresh control plane and dev server, N namespaces (``--n``, default 1,000) labelled
``bench-css=yes`` and S scopes per kind (``--scopes``, default 10: S sources in one spec, each a
folder with one key), one ClusterMachineIdentity, the operator started once the namespaces exist:

1. ClusterSecretSync: one object selecting the N namespaces by label, its syncTemplate reading the
   S folders ``/css/s<i>`` into Secret ``css-target``. Figures: apply → all N Secrets present;
   list calls at the dev server until then (expected: S, one per scope); operator RSS after.
2. A namespace created with the label → its Secret (``--new`` times; median and max).
3. A change at the service (one key of ``/css/s0``) → all N Secrets hold it (p50/p99/max per
   Secret, from the change).
4. The same for N ordinary SecretSyncs beside it (one per namespace, the S folders ``/plain/s<i>``,
   Secret ``plain-target``): bulk create → all N Secrets; lists; RSS; a namespace and its
   SecretSync created together → its Secret; a change at ``/plain/s0`` → all N.

Run: ``.venv/bin/python bench/bench_cluster_secretsync.py [--n 1000] [--scopes 10]``.

Clocks (``time.monotonic()`` in this process): "apply" is just before the create request is sent;
"present" is when this process's LIST+WATCH of managed Secrets first shows the Secret with the
expected value (so it includes the watch's delivery delay, a few ms). List calls are the dev
server's counters (``/stats``), reset just before each apply and read once all Secrets are present
(plus 2 s). RSS is the operator's VmRSS from /proc at the end of each phase.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from _common import (
    CLUSTER_IDENTITY,
    MANAGED_SELECTOR,
    PROJECT_ID,
    Api,
    Env,
    RunInfo,
    add_control_plane_option,
    decode,
    environment,
    fmt_ms,
    fmt_s,
    log,
    op_pid,
    percentile,
    rss_mib,
    secret_sync_body,
    table,
)

LABEL = "bench-css"
CSS_NAME = "bench"
CSS_TARGET = "css-target"
PLAIN_TARGET = "plain-target"


class SecretTracker:
    """Every managed Secret's value of one key, and when each first held a wanted value."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.values: dict[tuple[str, str], str | None] = {}
        self.seen_at: dict[tuple[str, str, str], float] = {}
        self.synced = asyncio.Event()

    def handle(self, typ: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        where = (meta.get("namespace", ""), meta.get("name", ""))
        if typ == "DELETED":
            self.values.pop(where, None)
            return
        value = decode(obj, self.key)
        self.values[where] = value
        if value is not None:
            self.seen_at.setdefault((*where, value), time.monotonic())

    def holding(self, name: str, value: str) -> int:
        return sum(1 for (_, n), v in self.values.items() if n == name and v == value)

    async def wait(self, name: str, value: str, count: int, limit_s: float) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.holding(name, value) >= count:
                return True
            await asyncio.sleep(0.05)
        return self.holding(name, value) >= count

    def times(self, name: str, value: str, since: float) -> list[float]:
        return [t - since for (_, n, v), t in self.seen_at.items() if n == name and v == value]


def lists(stats: dict[str, Any], prefix: str) -> int:
    by_scope: dict[str, int] = stats.get("listSecretsByScope") or {}
    return sum(v for k, v in by_scope.items() if k.startswith(f"dev:{prefix}"))


def sources(prefix: str, scopes: int) -> list[dict[str, Any]]:
    return [{"projectId": PROJECT_ID, "environment": "dev", "path": f"{prefix}/s{i}"} for i in range(scopes)]


def css_body(scopes: int) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterSecretSync",
        "metadata": {"name": CSS_NAME},
        "spec": {
            "namespaceSelector": {"matchLabels": {LABEL: "yes"}},
            "syncTemplate": {
                "identityRef": {"kind": "ClusterMachineIdentity", "name": CLUSTER_IDENTITY},
                "sources": sources("/css", scopes),
                "target": {"name": CSS_TARGET},
            },
        },
    }


def plain_body(namespace: str, scopes: int) -> dict[str, Any]:
    body = secret_sync_body(namespace, "plain", path="/plain/s0")
    body["spec"]["sources"] = sources("/plain", scopes)
    body["spec"]["target"] = {"name": PLAIN_TARGET}
    return body


def namespace_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {LABEL: "yes"}}}


async def run(args: argparse.Namespace, info: RunInfo) -> dict[str, Any]:
    secrets = [
        {"environment": "dev", "path": f"{prefix}/s{i}", "key": f"K{i}", "value": f"{prefix[1:]}-{i}-0"}
        for prefix in ("/css", "/plain")
        for i in range(args.scopes)
    ]
    with environment(secrets=secrets, run=info, keep=args.keep) as env:
        api = Api(env.cp)
        try:
            return await _phases(env, api, args)
        finally:
            await api.close()


async def _phases(env: Env, api: Api, args: argparse.Namespace) -> dict[str, Any]:
    n, s = args.n, args.scopes
    r: dict[str, Any] = {}
    names = [f"bench-{i:04d}" for i in range(n)]
    await api.gather_limited([lambda ns=ns: api.create(namespace_body(ns)) for ns in names])
    log(f"{n} namespaces created")
    tracker = SecretTracker("K0")
    watch = asyncio.create_task(
        api.watch("/api/v1/secrets", tracker.handle, tracker.synced, label_selector=MANAGED_SELECTOR)
    )
    try:
        await tracker.synced.wait()
        op = await asyncio.to_thread(env.start_operator, "operator")
        pid = op_pid(op)
        r["rss_idle"] = rss_mib(pid)

        # 1. The ClusterSecretSync.
        env.service.reset_stats()
        applied = time.monotonic()
        await api.request("POST", "/apis/secretferry.io/v1alpha1/clustersecretsyncs", css_body(s))
        if not await tracker.wait("css-target", "css-0-0", n, args.timeout):
            raise RuntimeError(f"only {tracker.holding(CSS_TARGET, 'css-0-0')} of {n} css Secrets")
        r["css_all"] = max(tracker.times(CSS_TARGET, "css-0-0", applied))
        await asyncio.sleep(2)
        stats = env.service.stats()
        r["css_lists"] = lists(stats, "/css/")
        log(f"css lists by scope: {sorted(stats.get('listSecretsByScope', {}).items())}")
        r["css_rss"] = rss_mib(pid)
        log(f"css: {n} Secrets in {fmt_s(r['css_all'])}, {r['css_lists']} lists, RSS {r['css_rss']:.0f} MiB")

        # 2. New namespaces.
        new_times: list[float] = []
        for j in range(args.new):
            ns = f"bench-new-{j:02d}"
            start = time.monotonic()
            await api.create(namespace_body(ns))
            if not await tracker.wait(CSS_TARGET, "css-0-0", n + j + 1, 30):
                raise RuntimeError(f"no Secret in {ns}")
            new_times.append(tracker.seen_at[(ns, CSS_TARGET, "css-0-0")] - start)
        r["css_new"] = new_times
        total = n + args.new

        # 3. A change at the service.
        start = time.monotonic()
        env.service.set_secret(PROJECT_ID, "dev", "/css/s0", "K0", "css-0-1")
        if not await tracker.wait(CSS_TARGET, "css-0-1", total, args.timeout):
            raise RuntimeError(f"only {tracker.holding(CSS_TARGET, 'css-0-1')} of {total} changed")
        r["css_change"] = tracker.times(CSS_TARGET, "css-0-1", start)
        log(f"css change: p50 {fmt_ms(percentile(r['css_change'], 50))}")

        # 4. N ordinary SecretSyncs beside it.
        env.service.reset_stats()
        applied = time.monotonic()
        await api.gather_limited([lambda ns=ns: api.create(plain_body(ns, s)) for ns in names])
        if not await tracker.wait(PLAIN_TARGET, "plain-0-0", n, args.timeout):
            raise RuntimeError(f"only {tracker.holding(PLAIN_TARGET, 'plain-0-0')} of {n} plain Secrets")
        r["plain_all"] = max(tracker.times(PLAIN_TARGET, "plain-0-0", applied))
        await asyncio.sleep(2)
        stats = env.service.stats()
        r["plain_lists"] = lists(stats, "/plain/")
        log(f"plain lists by scope: {sorted(stats.get('listSecretsByScope', {}).items())}")
        r["plain_rss"] = rss_mib(pid)
        log(f"plain: {n} Secrets in {fmt_s(r['plain_all'])}, {r['plain_lists']} lists")

        new_times = []
        for j in range(args.new):
            ns = f"bench-plain-{j:02d}"
            start = time.monotonic()
            await api.create({**namespace_body(ns), "metadata": {"name": ns}})
            await api.create(plain_body(ns, s))
            if not await tracker.wait(PLAIN_TARGET, "plain-0-0", n + j + 1, 30):
                raise RuntimeError(f"no Secret in {ns}")
            new_times.append(tracker.seen_at[(ns, PLAIN_TARGET, "plain-0-0")] - start)
        r["plain_new"] = new_times

        start = time.monotonic()
        env.service.set_secret(PROJECT_ID, "dev", "/plain/s0", "K0", "plain-0-1")
        if not await tracker.wait(PLAIN_TARGET, "plain-0-1", total, args.timeout):
            raise RuntimeError(f"only {tracker.holding(PLAIN_TARGET, 'plain-0-1')} of {total} changed")
        r["plain_change"] = tracker.times(PLAIN_TARGET, "plain-0-1", start)
        r["rss_end"] = rss_mib(pid)
    finally:
        watch.cancel()
    return r


def report(r: dict[str, Any], args: argparse.Namespace, info: RunInfo) -> None:
    print()
    print(info.header())
    print(
        f"N={args.n} namespaces, S={args.scopes} scopes per kind (one ClusterSecretSync with S sources;"
        f" N SecretSyncs with S other sources); {args.new} new namespaces per kind; operator RSS idle"
        f" {r['rss_idle']:.0f} MiB, at the end {r['rss_end']:.0f} MiB"
    )
    rows = []
    for kind, label in (("css", "1 ClusterSecretSync"), ("plain", f"{args.n} SecretSyncs")):
        change = r[f"{kind}_change"]
        p50, p99 = percentile(change, 50), percentile(change, 99)
        rows.append(
            [
                label,
                fmt_s(r[f"{kind}_all"]),
                r[f"{kind}_lists"],
                f"{r[f'{kind}_rss']:.0f} MiB",
                f"{fmt_ms(statistics.median(r[f'{kind}_new']))} / {fmt_ms(max(r[f'{kind}_new']))}",
                f"{fmt_ms(p50)} / {fmt_ms(p99)} / {fmt_ms(max(change))}",
            ]
        )
    print(
        table(
            [
                "kind",
                "apply → all N Secrets",
                "lists",
                "RSS after",
                "new namespace → Secret (median / max)",
                "change → all Secrets (p50 / p99 / max)",
            ],
            rows,
        )
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="selected namespaces (default 1000)")
    p.add_argument("--scopes", type=int, default=10, help="sources per spec, one scope each (default 10)")
    p.add_argument("--new", type=int, default=5, help="namespaces created one by one per kind (default 5)")
    p.add_argument("--timeout", type=float, default=600.0, help="per phase, seconds")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    add_control_plane_option(p)
    args = p.parse_args()
    info = RunInfo(args.control_plane)
    report(asyncio.run(run(args, info)), args, info)


if __name__ == "__main__":
    main()
