"""Issue 22: calls at the service under each spec.refreshPolicy (Periodic, OnChange, CreatedOnce).

On a fresh control plane and dev server, N SecretSyncs per policy (3N in all), each reading a scope
of its own (``/refresh/<policy>/s<i>``, so the dev server's per-scope list counter tells the
policies apart), refreshInterval ``--refresh`` (default 5s), instantUpdates left at its default
(true), one ClusterMachineIdentity:

1. First sync: the SecretSyncs are created before the operator starts; the operator starts; lists
   per policy until all 3N are Ready.
2. Window: stats reset; for ``--window`` s a secret in every scope is changed every
   ``--change-every`` s (a service change the event stream announces); lists per policy, logins
   and streams opened in the window.
3. Restart: stats reset, operator restarted, lists per policy until it has reconciled all 3N again
   and ``--settle`` s more have passed (a Periodic scope is listed once on start-up and again at each
   refresh in that time).

Expected: Periodic lists about once per change and per refresh; OnChange and CreatedOnce list N
times at the first sync (one list each) and 0 times in the window and after the restart.

Run: ``.venv/bin/python bench/bench_refresh_policy.py [--n 20] [--window 20]`` (about 2 minutes at
the defaults on 2 cores).

Clocks (``time.monotonic()`` in this process): the window opens after the stats reset that follows
"all Ready" (seen on this process's LIST+WATCH of the SecretSyncs) and closes ``--window`` s later;
the restart phase runs from the stats reset just before the restarted operator's Popen until
``secretferry_syncs_total`` >= 3N has been stable for 3 s, plus ``--settle`` s. Figures are the dev
server's counters (``/stats``: listSecretsByScope, routes, streamsOpened), read at the end of each
phase.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _common import (
    PROJECT_ID,
    SYNCS_PATH,
    Api,
    Env,
    RunInfo,
    SyncTracker,
    add_control_plane_option,
    environment,
    log,
    metric,
    safe_metrics,
    secret_sync_body,
    table,
)

POLICIES = ("Periodic", "OnChange", "CreatedOnce")
LOGIN_ROUTE = "POST /api/v1/auth/kubernetes-auth/login"


def scope_path(policy: str, i: int) -> str:
    return f"/refresh/{policy.lower()}/s{i:03d}"


def lists_by_policy(stats: dict[str, Any]) -> dict[str, int]:
    by_scope: dict[str, int] = stats.get("listSecretsByScope") or {}
    return {
        p: sum(v for k, v in by_scope.items() if k.startswith(f"dev:/refresh/{p.lower()}/")) for p in POLICIES
    }


async def settle(op: Any, at_least: float, *, limit_s: float, quiet: float = 3.0) -> None:
    """Until secretferry_syncs_total >= at_least and unchanged for ``quiet`` s (or ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    last, last_change = -1.0, time.monotonic()
    while time.monotonic() < deadline:
        total = metric(safe_metrics(op), "secretferry_syncs_total")
        now = time.monotonic()
        if total != last:
            last, last_change = total, now
        if total >= at_least and now - last_change >= quiet:
            return
        await asyncio.sleep(0.5)


async def run(args: argparse.Namespace, info: RunInfo) -> dict[str, Any]:
    n = args.n
    secrets = [
        {"environment": "dev", "path": scope_path(p, i), "key": "KEY", "value": f"value-{p}-{i}-0"}
        for p in POLICIES
        for i in range(n)
    ]
    with environment(secrets=secrets, run=info, keep=args.keep) as env:
        api = Api(env.cp)
        try:
            return await _phases(env, api, args)
        finally:
            await api.close()


async def _phases(env: Env, api: Api, args: argparse.Namespace) -> dict[str, Any]:
    n, total = args.n, 3 * args.n
    r: dict[str, Any] = {}
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-refresh"}})
    bodies = []
    for p in POLICIES:
        for i in range(n):
            body = secret_sync_body(
                "bench-refresh", f"{p.lower()}-{i:03d}", path=scope_path(p, i), refresh=args.refresh
            )
            body["spec"]["refreshPolicy"] = p
            bodies.append(body)
    await api.gather_limited([lambda b=b: api.create(b) for b in bodies])
    tracker = SyncTracker()
    watch = asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced))
    try:
        await tracker.synced.wait()
        env.service.reset_stats()
        op = env.start_operator("operator")
        if not await tracker.wait_until(lambda: len(tracker.ready) >= total, args.timeout):
            raise RuntimeError(f"only {len(tracker.ready)} of {total} Ready")
        await settle(op, total, limit_s=args.timeout)
        r["first"] = lists_by_policy(env.service.stats())
        r["modes"] = {
            p: sorted({m for k, m in tracker.mode.items() if k[1].startswith(p.lower())}) for p in POLICIES
        }
        log(f"all {total} Ready; first-sync lists {r['first']}")

        env.service.reset_stats()
        started, changes = time.monotonic(), 0
        while time.monotonic() - started < args.window:
            changes += 1
            for p in POLICIES:
                for i in range(n):
                    path = scope_path(p, i)
                    env.service.set_secret(PROJECT_ID, "dev", path, "KEY", f"value-{p}-{i}-{changes}")
            await asyncio.sleep(max(0.0, min(args.change_every, args.window - (time.monotonic() - started))))
        stats = env.service.stats()
        r["window"] = lists_by_policy(stats)
        r["changes"] = changes
        r["window_logins"] = stats["routes"].get(LOGIN_ROUTE, 0)
        r["window_streams"] = stats.get("streamsOpened", 0)
        log(f"window: {changes} changes per scope; lists {r['window']}")

        env.service.reset_stats()
        op.restart()
        await settle(op, total, limit_s=args.timeout)
        await asyncio.sleep(args.settle)
        r["restart"] = lists_by_policy(env.service.stats())
        log(f"restart: lists {r['restart']}")
    finally:
        watch.cancel()
    return r


def report(r: dict[str, Any], args: argparse.Namespace, info: RunInfo) -> None:
    print()
    print(info.header())
    print(
        f"N={args.n} SecretSyncs per policy, one scope each; refreshInterval {args.refresh},"
        " instantUpdates true; "
        f"window {args.window:.0f} s with a change in every scope every {args.change_every:.0f} s "
        f"({r['changes']} changes); restart phase settled + {args.settle:.0f} s"
    )
    rows = [
        [p, ",".join(r["modes"][p]) or "-", r["first"][p], r["window"][p], r["restart"][p]] for p in POLICIES
    ]
    print(table(["policy", "updateMode", "lists: first sync", "lists: window", "lists: restart"], rows))
    print(f"window, all policies: {r['window_logins']} logins, {r['window_streams']} streams opened")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20, help="SecretSyncs per policy (default 20)")
    p.add_argument("--refresh", default="5s", help="spec.refreshInterval of every SecretSync (default 5s)")
    p.add_argument("--window", type=float, default=20.0, help="measurement window, s (default 20)")
    p.add_argument(
        "--change-every", type=float, default=5.0, help="a change in every scope every this many s"
    )
    p.add_argument("--settle", type=float, default=6.0, help="s to keep counting after the restart settled")
    p.add_argument("--timeout", type=float, default=180.0, help="per phase, seconds")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    add_control_plane_option(p)
    args = p.parse_args()
    info = RunInfo(args.control_plane)
    report(asyncio.run(run(args, info)), args, info)


if __name__ == "__main__":
    main()
