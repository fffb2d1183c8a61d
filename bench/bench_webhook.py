"""Change-to-Secret latency on a plan without event streams: by signed webhook, and by polling.

Real control plane, dev server with ``--no-events-plan`` (subscriptions are refused, as on plans
without the paid event feature), ``secretferry run`` with the webhook receiver on. ``--n``
SecretSyncs (1,000 by default) on one project across ``--scopes`` scopes (20; distinct paths in the
``dev`` environment, one ClusterMachineIdentity); odd scopes are recursive and their changes land in
a subfolder (``/hooks/sNN/deep``), even ones are exact. Three phases on the same objects:

1. **webhook**: every SecretSync has ``refreshInterval: 1h`` (no poll during the run), and one
   project webhook (``POST /api/v1/webhooks``, ``secretPath: /hooks/**``, the signing key the
   operator mounts) is registered at the dev server, which signs and POSTs it on every change as the
   real server does. ``--changes`` changes, one at a time, each to a random scope.
2. **forged flood**: ``--flood`` (10,000) requests to the receiver signed with guessed keys, with
   one real change written in the middle. ``--flood-limits raised`` (the default): the per-source
   rate limit raised, so every one is HMAC-checked (the expensive case). ``--flood-limits default``:
   the chart's limits (20/s, burst 100 per source), so the flood, sent from 127.0.0.1 like the dev
   server's webhooks, empties the bucket they share, as a flood through the same Ingress would;
   ``--over-rate-verify N`` sets ``SECRETFERRY_WEBHOOK_OVER_RATE_VERIFY_PER_SECOND`` (0: the
   behaviour before the shared budget, every request over rate refused 429). Reported: lists the
   forgeries caused (the dev server's list counter from the flood's start to the real change, and
   after it minus what the real change costs), the answers, the operator's RSS before and after and
   its CPU during the flood, the real change's latency and how the dev server's webhook for it was
   answered (its ``lastStatus``/``lastError``).
3. **polling**: the webhook deleted, every SecretSync patched to ``refreshInterval: --poll-interval``
   (5s); ``--poll-changes`` changes.

Clocks (``time.monotonic()`` in this process). Latency = from the dev server's admin write
(``PUT /_admin/secrets``) *returning* to the first event of this process's watch on the managed
Secrets (label selector) that carries the new value: for one SecretSync picked at random among the
scope's, and for all of them (all-of-scope). Lists, per phase: the dev server's ``listSecrets``
counter, reset at the phase's start, divided by the phase's changes. RSS: ``VmRSS`` of the operator.

Run: ``.venv/bin/python bench/bench_webhook.py [--n 1000 --scopes 20 --changes 200 --poll-changes 40
--flood 10000]`` (``--n 200 --changes 40 --poll-changes 10``: about 3 minutes). In the polling phase each
change waits a random part of the poll interval after the previous one, so it lands at a random point of
the scopes' poll cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import time
from typing import Any

import aiohttp
import httpx

from _common import (
    IDENTITY_ID,
    PROJECT_ID,
    Api,
    Env,
    RunInfo,
    ScopeLayout,
    SecretWatcher,
    SyncTracker,
    add_control_plane_option,
    cpu_seconds,
    environment,
    fmt_ms,
    fmt_s,
    load,
    log,
    metric,
    op_pid,
    percentile,
    proc_status_kib,
    safe_metrics,
    table,
    watch_syncs_and_secrets,
)
from secretferry.devcluster.net import free_port
from secretferry.service import webhook_signature as sig

NAMESPACE = "bench-webhook"
KEY = "VALUE"
SIGNING_KEY = "bench-webhook-signing-key"
NO_POLL = "1h"  # the webhook phase: no scope is due during the run, only the webhook brings a change
SCOPES = ScopeLayout("/hooks")


async def one_change(
    env: Env,
    watcher: SecretWatcher,
    by_scope: dict[int, list[str]],
    value: str,
    *,
    limit_s: float,
    rng: random.Random,
) -> tuple[str, float | None, float | None]:
    """Write one change to a random scope → (kind, one SecretSync's latency, all-of-scope latency)."""
    j = rng.randrange(len(by_scope))
    names = by_scope[j]
    measured = rng.choice(names)

    def write() -> float:
        env.service.set_secret(PROJECT_ID, "dev", SCOPES.change_path(j), KEY, value)
        return time.monotonic()

    written = await asyncio.to_thread(write)
    seen = await watcher.wait(measured, value, limit_s)
    all_seen = await asyncio.gather(*(watcher.wait(n, value, limit_s) for n in names))
    everyone = (
        max(t for t in all_seen if t is not None) - written if all(t is not None for t in all_seen) else None
    )
    return SCOPES.kind(j), (None if seen is None else seen - written), everyone


async def run_changes(
    env: Env,
    watcher: SecretWatcher,
    by_scope: dict[int, list[str]],
    count: int,
    *,
    mode: str,
    args: argparse.Namespace,
    rng: random.Random,
    poll_seconds: float = 0.0,
) -> dict[str, Any]:
    op = env.operators[-1]
    pid = op_pid(op)
    await asyncio.sleep(1.0)  # the previous phase's tail (status patches, lists) settles
    env.service.reset_stats()
    m0 = safe_metrics(op)
    cpu0, w0, load0 = cpu_seconds(pid), time.monotonic(), load()
    one: list[float] = []
    kinds: list[str] = []
    everyone: list[float] = []
    timeouts = 0
    for i in range(count):
        if timeouts >= 3 and not one:
            log(f"{mode}: 3 changes never arrived and none did; giving up on this run")
            break
        kind, latency, all_latency = await one_change(
            env,
            watcher,
            by_scope,
            f"{mode}-{i}-{rng.getrandbits(32):08x}",
            limit_s=args.change_timeout,
            rng=rng,
        )
        if latency is None or all_latency is None:
            timeouts += 1
            log(f"{mode} change {i}: not every Secret of the scope got it in {args.change_timeout} s")
        if latency is not None:
            one.append(latency)
            kinds.append(kind)
        if all_latency is not None:
            everyone.append(all_latency)
        # Polling: a random pause, so a change lands at a random point of the scopes' poll cycle
        # (changes written right after the previous one arrived would land just after a poll).
        await asyncio.sleep(args.gap + (rng.uniform(0, poll_seconds) if poll_seconds else 0.0))
    seconds = time.monotonic() - w0
    await asyncio.sleep(1.0)  # lists the last change caused are counted
    m1 = safe_metrics(op)
    stats = env.service.stats()
    return {
        "mode": mode,
        "changes": count,
        "one": one,
        "kinds": kinds,
        "all": everyone,
        "timeouts": timeouts,
        "lists": stats["listSecrets"],
        "webhooks_accepted": metric(m1, "secretferry_webhook_requests_total", 'result="accepted"')
        - metric(m0, "secretferry_webhook_requests_total", 'result="accepted"'),
        "nudges": metric(m1, "secretferry_webhook_scope_nudges_total")
        - metric(m0, "secretferry_webhook_scope_nudges_total"),
        "cpu_pct": 100 * (cpu_seconds(pid) - cpu0) / max(seconds, 1e-9),
        "seconds": seconds,
        "load": f"{load0} → {load()}",
    }


def forged_request(i: int) -> tuple[bytes, str]:
    now_ms = time.time_ns() // 1_000_000
    body = json.dumps(
        {
            "event": "secrets.modified",
            "project": {"workspaceId": PROJECT_ID, "environment": "dev", "secretPath": SCOPES.path(i % 20)},
            "timestamp": now_ms,
        },
        separators=(",", ":"),
    ).encode()
    return body, sig.header_value(body, f"guessed-key-{i}", now_ms)


async def flood(
    env: Env,
    watcher: SecretWatcher,
    by_scope: dict[int, list[str]],
    *,
    url: str,
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    """``args.flood`` forged requests, ``args.flood_concurrency`` at a time; a real change at half."""
    op = env.operators[-1]
    pid = op_pid(op)
    await asyncio.sleep(1.0)
    env.service.reset_stats()
    rss_before = proc_status_kib(pid, "VmRSS")
    m0 = safe_metrics(op)
    cpu0 = cpu_seconds(pid)
    statuses: dict[int, int] = {}
    sent = 0
    half = asyncio.Event()
    connector = aiohttp.TCPConnector(force_close=True, limit=args.flood_concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def sender() -> None:
            nonlocal sent
            while sent < args.flood:
                i = sent
                sent += 1
                if sent >= args.flood // 2:
                    half.set()
                body, header = forged_request(i)
                try:
                    async with session.post(
                        url, data=body, headers={sig.HEADER: header, "Content-Type": "application/json"}
                    ) as resp:
                        await resp.read()
                        statuses[resp.status] = statuses.get(resp.status, 0) + 1
                except aiohttp.ClientError:
                    statuses[0] = statuses.get(0, 0) + 1
            ended.append((time.monotonic(), cpu_seconds(pid)))  # the flood's end: its last sender's

        ended: list[tuple[float, float]] = []
        started = time.monotonic()
        senders = [asyncio.create_task(sender()) for _ in range(args.flood_concurrency)]
        await half.wait()
        lists_before_change = env.service.stats()["listSecrets"]
        kind, latency, all_latency = await one_change(
            env, watcher, by_scope, f"flood-{rng.getrandbits(32):08x}", limit_s=args.change_timeout, rng=rng
        )
        await asyncio.gather(*senders)
        # the flood alone: a change that never arrives is waited for past its end
        flood_end, cpu_end = max(ended)
        seconds = flood_end - started
    cpu_s = cpu_end - cpu0
    cpu_pct = 100 * cpu_s / max(seconds, 1e-9)
    rss_after = proc_status_kib(pid, "VmRSS")
    await asyncio.sleep(1.0)
    lists_total = env.service.stats()["listSecrets"]
    m1 = safe_metrics(op)
    return {
        "requests": sent,
        "seconds": seconds,
        "statuses": statuses,
        "lists_before_change": lists_before_change,
        "lists_total": lists_total,
        "forged_counted": metric(m1, "secretferry_webhook_requests_total", 'result="forged"')
        - metric(m0, "secretferry_webhook_requests_total", 'result="forged"'),
        "rate_limited": metric(m1, "secretferry_webhook_requests_total", 'result="rate_limited"')
        - metric(m0, "secretferry_webhook_requests_total", 'result="rate_limited"'),
        "accepted": metric(m1, "secretferry_webhook_requests_total", 'result="accepted"')
        - metric(m0, "secretferry_webhook_requests_total", 'result="accepted"'),
        "over_rate_verified": metric(m1, "secretferry_webhook_over_rate_verified_total")
        - metric(m0, "secretferry_webhook_over_rate_verified_total"),
        "cpu_pct": cpu_pct,
        "cpu_us_per_request": 1e6 * cpu_s / max(1, sent),
        "hook_status": webhook_status(env),
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "peak_rss_kib": proc_status_kib(pid, "VmHWM"),
        "change_kind": kind,
        "change_one": latency,
        "change_all": all_latency,
    }


def register_webhook(env: Env, url: str) -> str:
    token = env.service.issue_token(IDENTITY_ID)
    created = httpx.post(
        f"{env.service.base_url}/api/v1/webhooks",
        json={
            "projectId": PROJECT_ID,
            "environment": "dev",
            "secretPath": "/hooks/**",
            "webhookUrl": url,
            "webhookSecretKey": SIGNING_KEY,
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    created.raise_for_status()
    return str(created.json()["webhook"]["id"])


def webhook_status(env: Env) -> str:
    """How the receiver answered the dev server's last webhook: ``success``, or ``failed (HTTPError)``."""
    token = env.service.issue_token(IDENTITY_ID)
    listed = httpx.get(
        f"{env.service.base_url}/api/v1/webhooks",
        params={"workspaceId": PROJECT_ID, "environment": "dev"},
        headers={"Authorization": f"Bearer {token}"},
    )
    listed.raise_for_status()
    hooks = listed.json().get("webhooks", [])
    if not hooks:
        return "?"
    hook = hooks[0]
    return str(hook.get("lastStatus")) + (
        f" ({hook['lastRunErrorMessage']})" if hook.get("lastRunErrorMessage") else ""
    )


def delete_webhook(env: Env, webhook_id: str) -> None:
    token = env.service.issue_token(IDENTITY_ID)
    httpx.delete(
        f"{env.service.base_url}/api/v1/webhooks/{webhook_id}", headers={"Authorization": f"Bearer {token}"}
    ).raise_for_status()


async def main_async(args: argparse.Namespace, run: RunInfo) -> dict[str, Any]:
    rng = random.Random(args.seed)
    secrets = SCOPES.seed_secrets(args.scopes, KEY)
    out: dict[str, Any] = {"phases": []}
    with environment(secrets=secrets, run=run, devserver_args=["--no-events-plan"], keep=args.keep) as env:
        api = Api(env.cp)
        tasks: list[asyncio.Task[None]] = []
        try:
            by_scope = await SCOPES.create_syncs(
                api, NAMESPACE, syncs=args.n, scopes=args.scopes, refresh=NO_POLL
            )
            tracker, watcher = SyncTracker(), SecretWatcher(KEY)
            await watch_syncs_and_secrets(api, NAMESPACE, tracker, watcher, tasks)

            keyfile = env.workdir / "webhook-signing-key"
            keyfile.write_text(SIGNING_KEY + "\n")
            port = free_port()
            url = f"http://127.0.0.1:{port}/webhook"
            t0 = time.monotonic()
            limits: dict[str, str] = {}
            if args.flood_limits == "raised":
                # every forged request of the flood is HMAC-checked, not refused by the rate limit
                limits |= {
                    "SECRETFERRY_WEBHOOK_RATE_PER_SECOND": "1000000",
                    "SECRETFERRY_WEBHOOK_BURST": "1000000",
                }
            if args.over_rate_verify is not None:
                limits["SECRETFERRY_WEBHOOK_OVER_RATE_VERIFY_PER_SECOND"] = str(args.over_rate_verify)
            await asyncio.to_thread(
                env.start_operator,
                "op-webhook",
                SECRETFERRY_WEBHOOK_PORT=str(port),
                SECRETFERRY_WEBHOOK_SIGNING_KEY_FILE=str(keyfile),
                **limits,
            )
            ok = await tracker.wait_until(lambda: len(tracker.ready) >= args.n, args.timeout)
            out["ready"] = max(tracker.first_ready.values()) - t0 if ok else None
            log(f"all Ready after {fmt_s(out['ready'])}")
            await asyncio.sleep(3.0)  # the start-up tail (status patches) drains
            pid = op_pid(env.operators[-1])
            out["rss_idle_kib"] = proc_status_kib(pid, "VmRSS")

            webhook_id = register_webhook(env, url)
            out["phases"].append(
                await run_changes(env, watcher, by_scope, args.changes, mode="webhook", args=args, rng=rng)
            )
            log(f"webhook: p50 {fmt_ms(percentile(out['phases'][-1]['one'], 50))}")

            if args.flood > 0:
                out["flood"] = await flood(env, watcher, by_scope, url=url, args=args, rng=rng)
                log(f"flood: {out['flood']['requests']} in {fmt_s(out['flood']['seconds'])}")

            if args.poll_changes > 0:
                delete_webhook(env, webhook_id)
                await api.gather_limited(
                    [
                        lambda n=n: api.merge_patch_sync(
                            NAMESPACE, n, {"spec": {"refreshInterval": args.poll_interval}}
                        )
                        for names in by_scope.values()
                        for n in names
                    ]
                )
                await asyncio.sleep(2 * _seconds(args.poll_interval))  # every scope polled at the new pace
                out["phases"].append(
                    await run_changes(
                        env,
                        watcher,
                        by_scope,
                        args.poll_changes,
                        mode=f"polling ({args.poll_interval})",
                        args=args,
                        rng=rng,
                        poll_seconds=_seconds(args.poll_interval),
                    )
                )
                log(f"polling: p50 {fmt_ms(percentile(out['phases'][-1]['one'], 50))}")
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await api.close()
    return out


def _seconds(interval: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(interval[:-1]) * units[interval[-1]]


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    headers = [
        "mode",
        "changes",
        "one p50",
        "p99",
        "max",
        "exact p50",
        "recursive p50",
        "all-of-scope p50",
        "p99",
        "timeouts",
        "lists (per change)",
        "webhooks accepted",
        "scope nudges",
        "op CPU",
        "load",
    ]
    rows = []
    for r in out["phases"]:
        exact = [t for t, k in zip(r["one"], r["kinds"], strict=True) if k == "exact"]
        recursive = [t for t, k in zip(r["one"], r["kinds"], strict=True) if k == "recursive"]
        rows.append(
            [
                r["mode"],
                r["changes"],
                fmt_ms(percentile(r["one"], 50)),
                fmt_ms(percentile(r["one"], 99)),
                fmt_ms(max(r["one"], default=float("nan"))),
                fmt_ms(percentile(exact, 50)),
                fmt_ms(percentile(recursive, 50)),
                fmt_ms(percentile(r["all"], 50)),
                fmt_ms(percentile(r["all"], 99)),
                r["timeouts"],
                f"{r['lists']} ({r['lists'] / max(1, r['changes']):.2f})",
                f"{r['webhooks_accepted']:.0f}",
                f"{r['nudges']:.0f}",
                f"{r['cpu_pct']:.0f}%",
                r["load"],
            ]
        )
    print()
    print(
        f"{args.n} SecretSyncs, {args.scopes} scopes (half recursive), one project, dev server "
        "--no-events-plan; latency = admin write returned -> our Secret watch sees the value"
    )
    print(
        f"start-up: all Ready {fmt_s(out.get('ready'))}; operator RSS idle {out.get('rss_idle_kib', 0)} KiB"
    )
    print(table(headers, rows))
    f = out.get("flood")
    if f:
        forged_lists = f["lists_before_change"]
        budget = "operator default" if args.over_rate_verify is None else f"{args.over_rate_verify:g}/s"
        print(
            f"forged flood: {f['requests']} requests ({args.flood_concurrency} at a time, one source) in "
            f"{f['seconds']:.2f} s ({f['requests'] / f['seconds']:.0f}/s); rate limits {args.flood_limits}, "
            f"over-rate budget {budget}; answers {f['statuses']}; counted forged {f['forged_counted']:.0f}, "
            f"rate_limited {f['rate_limited']:.0f}, accepted {f['accepted']:.0f}; verified past the "
            f"source's bucket {f['over_rate_verified']:.0f}; operator CPU {f['cpu_pct']:.0f}% "
            f"({f['cpu_us_per_request']:.0f} µs a request)"
        )
        print(
            f"  lists from the flood's start to the real change: {forged_lists}; lists in all (the real "
            f"change's included): {f['lists_total']}"
        )
        print(
            f"  operator RSS {f['rss_before_kib']} -> {f['rss_after_kib']} KiB "
            f"({f['rss_after_kib'] - f['rss_before_kib']:+d} KiB; peak {f['peak_rss_kib']} KiB)"
        )
        print(
            f"  real change during the flood ({f['change_kind']} scope): one {fmt_ms(f['change_one'])}, "
            f"all-of-scope {fmt_ms(f['change_all'])} (timeout: not within {args.change_timeout:g} s,"
            f" the scopes' resync being {NO_POLL}); the dev server's webhook for it: {f['hook_status']}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="SecretSyncs")
    p.add_argument("--scopes", type=int, default=20)
    p.add_argument("--changes", type=int, default=200, help="changes brought by webhook")
    p.add_argument("--poll-changes", type=int, default=40, help="changes brought by polling (0: skip)")
    p.add_argument("--poll-interval", default="5s", help="refreshInterval in the polling phase")
    p.add_argument("--flood", type=int, default=10_000, help="forged requests (0: skip)")
    p.add_argument("--flood-concurrency", type=int, default=16)
    p.add_argument(
        "--flood-limits",
        choices=["raised", "default"],
        default="raised",
        help="raised: every forged request HMAC-checked; default: the chart's per-source limits, shared"
        " by the flood and the dev server's webhooks (both from 127.0.0.1)",
    )
    p.add_argument(
        "--over-rate-verify",
        type=float,
        default=None,
        help="SECRETFERRY_WEBHOOK_OVER_RATE_VERIFY_PER_SECOND (unset: the operator's default; 0: off)",
    )
    p.add_argument("--gap", type=float, default=0.2, help="pause between changes, s")
    p.add_argument("--change-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=24)
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    add_control_plane_option(p)
    args = p.parse_args()
    run = RunInfo(args.control_plane)
    out = asyncio.run(main_async(args, run))
    print(run.header())
    report(out, args)


if __name__ == "__main__":
    main()
