"""Issue 21: the operator against a self-hosted server's rate limits (40 secret reads a minute per IP).

For each (N SecretSyncs, S scopes), on a fresh control plane and a dev server started with
``--profile selfhosted-2024-10`` (no v4 list, no event stream, and the real server's rate limits:
40 list calls, 60 other reads, 200 writes and logins a minute per client IP and route):

1. **Cold start**: N SecretSyncs (scope i % S, ``refreshInterval`` ``--refresh``) are created before
   the operator starts; time until all N are Ready, the 429s the server answered, the list calls
   and the most list calls in any 60 s (against the limit of 40).
2. **Resync wave** (no event stream: the dev server runs with ``--no-events-plan``, so every scope
   polls): the operator keeps running for ``--window`` s after all are Ready; every scope
   comes due every ``--refresh``, so at S > 40 per minute the operator must spread the wave over
   several windows. Counted: list calls, 429s, the most lists in any 60 s, SecretSyncs not Ready at
   the end. ``--new-after`` s into the window a new SecretSync on a scope nobody reads yet is
   created: its list call is live work and goes before the wave (time until it is Ready).
3. **One list per resource**, for comparison: what an operator without shared scopes would send,
   N list calls per refresh interval, sent by this process from another loopback address
   (127.0.0.2, its own budget at the same dev server) as fast as 32 connections allow: how many
   the server answers and refuses, and the least time such a cycle needs at 40 a minute.

Targets: no 429 after the first (the pacer learns the budget from the first answer's headers);
lists per minute at or under the limit; cold start of S scopes in about ceil(S / 36) minutes (36 of
the 40 a minute; 4 are left to live work).

Run: ``.venv/bin/python bench/bench_ratelimit.py [--sizes 1000] [--scopes 10,100]`` (about 4 + 8
minutes). 100 scopes at 40 list calls a minute need 2.5 minutes at the very least: the timeouts
allow that (``--timeout``). ``--profile newest --rate-limits on`` would run the v4 server with the
same limits; ``--rate-limits off`` shows the same run without them.

Clocks (``time.monotonic()`` in this process): all Ready from just before the operator's Popen to
the last SecretSync seen ``Ready=True`` by this process's LIST+WATCH; new during the wave from just
before its POST to it being seen Ready. Counts come from the dev server's own counters
(``/_admin/stats``: route ``GET /api/v3/secrets/raw`` and statuses), polled every second; "most in
60 s" is the largest increase between two polls at most 60 s apart (so within 1 s of exact).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

import httpx

from _common import (
    IDENTITY_ID,
    PROJECT_ID,
    SYNCS_PATH,
    Api,
    Env,
    RunInfo,
    SyncTracker,
    add_control_plane_option,
    environment,
    fmt_ms,
    fmt_s,
    load,
    log,
    secret_sync_body,
    table,
)

LIST_ROUTE = "GET /api/v3/secrets/raw"
LIMIT = 40  # the server's secretsLimit: what "lists per minute" is compared with


def scope_path(j: int) -> str:
    return f"/rl/s{j:03d}"


class Counts:
    """The dev server's list and 429 counters, sampled every second."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.samples: list[tuple[float, int, int]] = []  # (time, lists, 429s on any route)
        self._task: asyncio.Task[None] | None = None

    def _read(self) -> tuple[int, int]:
        stats = self.env.service.stats()
        refused = sum(v for k, v in stats["statuses"].items() if k.endswith(" 429"))
        return int(stats["routes"].get(LIST_ROUTE, 0)), int(refused)

    async def _loop(self) -> None:
        while True:
            lists, refused = await asyncio.to_thread(self._read)
            self.samples.append((time.monotonic(), lists, refused))
            await asyncio.sleep(1.0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def between(self, t0: float, t1: float) -> dict[str, Any]:
        """Lists, 429s, the first 429's time after t0, and the most lists in any 60 s of [t0, t1]."""
        window = [s for s in self.samples if t0 - 1.0 <= s[0] <= t1 + 1.0]
        if len(window) < 2:
            return {"lists": 0, "refused": 0, "first_429": None, "peak60": 0}
        first_refusal = next((t for t, _, r in window if r > window[0][2]), None)
        peak = 0
        j = 0
        for i in range(len(window)):
            while window[i][0] - window[j][0] > 60.0:
                j += 1
            peak = max(peak, window[i][1] - window[j][1])
        return {
            "lists": window[-1][1] - window[0][1],
            "refused": window[-1][2] - window[0][2],
            "first_429": None if first_refusal is None else first_refusal - t0,
            "peak60": peak,
            "minutes": (window[-1][0] - window[0][0]) / 60.0,
        }


async def run_case(n: int, s: int, args: argparse.Namespace, run: RunInfo) -> dict[str, Any]:
    # One scope more than the SecretSyncs read: the new one during the wave reads it alone.
    secrets = [
        {"environment": "dev", "path": scope_path(j), "key": "KEY", "value": f"v-{j}"} for j in range(s + 1)
    ]
    # That generation had no event stream: without one every scope polls at its refreshInterval,
    # which is what makes the resync wave (harmless once the profile drops the route itself).
    devserver_args = ["--profile", args.profile, "--no-events-plan"]
    if args.rate_limits:
        devserver_args += ["--rate-limits", args.rate_limits]
    r: dict[str, Any] = {"N": n, "S": s}
    selfhosted = args.profile == "selfhosted-2024-10"  # its TokenReview ignores audiences
    with environment(
        secrets=secrets,
        run=run,
        devserver_args=devserver_args,
        keep=args.keep,
        server_ignores_audience=selfhosted,
    ) as env:
        api = Api(env.cp)
        counts = Counts(env)
        try:
            await _run_case(env, api, counts, n, s, args, r)
        finally:
            await counts.stop()
            await api.close()
    return r


async def _run_case(
    env: Env, api: Api, counts: Counts, n: int, s: int, args: argparse.Namespace, r: dict[str, Any]
) -> None:
    namespaces = [f"bench-{i}" for i in range(max(1, min(args.namespaces, n)))]
    await api.gather_limited(
        [
            lambda ns=ns: api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in namespaces
        ]
    )
    names = [(namespaces[i % len(namespaces)], f"sync-{i:05d}", scope_path(i % s)) for i in range(n)]
    await api.gather_limited(
        [
            lambda ns=ns, nm=nm, p=p: api.create(secret_sync_body(ns, nm, path=p, refresh=args.refresh))
            for ns, nm, p in names
        ]
    )
    log(f"N={n} S={s}: created {n} SecretSyncs")
    tracker = SyncTracker()
    watch = asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced))
    try:
        await tracker.synced.wait()
        counts.start()
        # --- cold start ----------------------------------------------------------------------------
        r["load_start"] = load()
        t0 = time.monotonic()
        await asyncio.to_thread(env.start_operator, "op-start")
        # At 36 list calls a minute, plus room for the first probe and a slow start.
        limit_s = args.timeout + 60.0 * math.ceil(s / 36)
        ok = await tracker.wait_until(lambda: len(tracker.ready) >= n, limit_s, poll=0.5)
        t1 = time.monotonic()
        r["all_ready"] = max(tracker.first_ready.values()) - t0 if ok else None
        if not ok:
            log(f"only {len(tracker.ready)} of {n} Ready after {limit_s:.0f} s")
        await asyncio.sleep(1.5)  # one more sample
        r["cold"] = counts.between(t0, t1)
        log(f"N={n} S={s}: all Ready {fmt_s(r['all_ready'])}, {r['cold']}")

        # --- resync wave, a new SecretSync in it -------------------------------------------------------
        w0 = time.monotonic()
        await asyncio.sleep(args.new_after)
        new_key = (namespaces[0], "new-during-wave")
        created = time.monotonic()
        await api.create(secret_sync_body(*new_key, path=scope_path(s), refresh=args.refresh))
        ready = await tracker.wait_ready(new_key, args.window)
        r["new_wave"] = None if ready is None else ready - created
        await asyncio.sleep(max(0.0, w0 + args.window - time.monotonic()))
        w1 = time.monotonic()
        await asyncio.sleep(1.5)
        r["wave"] = counts.between(w0, w1)
        r["not_ready_end"] = n + 1 - len(tracker.ready)
        r["load_end"] = load()
        log(f"N={n} S={s}: wave {r['wave']}, new during wave {fmt_ms(r['new_wave'])}")
        for op in env.operators:
            op.stop()
        # --- one list per resource ---------------------------------------------------------------------
        r["naive"] = await naive_cycle(env, n, s)
        log(f"N={n} S={s}: one list per resource: {r['naive']}")
    finally:
        watch.cancel()


async def naive_cycle(env: Env, n: int, s: int) -> dict[str, Any]:
    """N list calls (one per SecretSync) from 127.0.0.2, 32 at a time: answered vs refused."""
    token = await asyncio.to_thread(env.service.issue_token, IDENTITY_ID)
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    statuses: dict[int, int] = {}
    gate = asyncio.Semaphore(32)  # connections of an eager client
    async with httpx.AsyncClient(
        transport=transport, base_url=env.service.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:

        async def one(i: int) -> None:
            params = {"workspaceId": PROJECT_ID, "environment": "dev", "secretPath": scope_path(i % s)}
            async with gate:
                answer = await client.get("/api/v3/secrets/raw", params=params)
            statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(n)))
    return {
        "answered": statuses.get(200, 0),
        "refused": statuses.get(429, 0),
        "other": sum(v for k, v in statuses.items() if k not in (200, 429)),
        "seconds": time.monotonic() - started,
        "min_cycle_minutes": n / LIMIT,
    }


def report(results: list[dict[str, Any]], args: argparse.Namespace, run: RunInfo) -> None:
    headers = [
        "N",
        "S",
        "cold start: all Ready",
        "429s (first at)",
        "lists / most in 60 s",
        f"wave ({args.window:.0f} s, refresh {args.refresh}): lists, per min",
        "429s / most in 60 s",
        "new during wave",
        "not Ready at end",
        "one list per resource: N lists → 200 / 429, cycle ≥",
        "load start → end",
    ]
    rows = []
    for r in results:
        cold, wave, naive = r["cold"], r["wave"], r["naive"]
        first = "" if cold["first_429"] is None else f" (at +{cold['first_429']:.0f}s)"
        per_min = wave["lists"] / wave["minutes"] if wave.get("minutes") else float("nan")
        rows.append(
            [
                r["N"],
                r["S"],
                fmt_s(r["all_ready"]),
                f"{cold['refused']}{first}",
                f"{cold['lists']} / {cold['peak60']}",
                f"{wave['lists']}, {per_min:.1f}",
                f"{wave['refused']} / {wave['peak60']}",
                fmt_ms(r["new_wave"]),
                r["not_ready_end"],
                f"{naive['answered']} / {naive['refused']}, {naive['min_cycle_minutes']:.0f} min",
                f"{r['load_start']} → {r['load_end']}",
            ]
        )
    print()
    print(run.header())
    print(
        f"Issue 21: rate limits of a self-hosted server (dev server --profile {args.profile}"
        + (f" --rate-limits {args.rate_limits}" if args.rate_limits else "")
        + f"; limit {LIMIT} list calls a minute per IP)"
    )
    print(
        "targets: no 429 after the first; lists a minute <= the limit; the new SecretSync Ready in the window"
    )
    print(table(headers, rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000", help="comma-separated N (e.g. 1000,10000)")
    p.add_argument("--scopes", default="10,100", help="comma-separated S")
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--refresh", default="1m", help="refreshInterval of every SecretSync (the wave's period)")
    p.add_argument("--window", type=float, default=150.0, help="resync-wave measurement window, s")
    p.add_argument(
        "--new-after", type=float, default=20.0, help="s into the wave to create the new SecretSync"
    )
    p.add_argument(
        "--timeout", type=float, default=240.0, help="cold start: seconds beyond ceil(S/36) minutes"
    )
    p.add_argument("--profile", default="selfhosted-2024-10", help="dev server --profile")
    p.add_argument(
        "--rate-limits", choices=["on", "off"], help="dev server --rate-limits (default: the profile's)"
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    add_control_plane_option(p)
    args = p.parse_args()
    run = RunInfo(args.control_plane)
    results = []
    for n in (int(x) for x in args.sizes.split(",") if x):
        for s in (int(x) for x in args.scopes.split(",") if x):
            if s <= n:
                results.append(asyncio.run(run_case(n, s, args, run)))
    report(results, args, run)


if __name__ == "__main__":
    main()
