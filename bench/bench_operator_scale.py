"""Issue 4: the operator at scale, on a real control plane, the dev server and ``secretferry run``.

For each (N SecretSyncs, S scopes), on a fresh control plane and dev server:

1. N SecretSyncs are created (parallel POSTs) over a few namespaces BEFORE the operator starts;
   SecretSync i reads scope i % S (one path each, one ClusterMachineIdentity: scopes = S).
2. The operator starts: time until all N are Ready; a new SecretSync created right after the
   operator is live (mid start-up storm) and another once all are Ready: time until each is Ready.
   RSS (VmRSS / VmHWM of the operator process) and its CPU time; list/login calls of the start-up.
3. Restart cycle: stats reset, operator restarted, calls counted until every SecretSync was
   reconciled again (a full cycle: expected S lists, at most one login). A new SecretSync created
   right after the restart (N Secrets exist now): time until it is Ready.
4. Periodic cycle (unless --no-periodic): specs patched to refreshInterval 20s with the operator
   stopped, operator started with SECRETFERRY_STREAMING_REFRESH_INTERVAL_SECONDS=20, then list
   calls are counted over a window; cycles = reconciles / N, so lists per cycle = lists / cycles.

Targets: 10,000 Ready < 60 s; a new one < 1 s; lists per cycle = S; RSS < 200 MiB.

Run: ``.venv/bin/python bench/bench_operator_scale.py [--sizes 100,1000,10000] [--scopes 10,100]``
(``--quick``: N=100, S=10 only, short window; well under 2 minutes).

``--rest 10,100`` measures only the two figures of a small install instead (about a minute each):
resident memory at rest (all Ready, then quiet) and the time from the operator's process start to
the first Secret written, seen by a watch on the managed Secrets.

``--control-plane production`` runs the same on a control plane with the binaries' defaults (etcd
fsyncs, API priority and fairness on, default in-flight limits); the README's figures are ``tuned``.
The report starts with the machine, its load, the commit and the control plane's profile and flags.

Clocks (``time.monotonic()`` in this process). "Seen Ready" is the arrival of the first event of
this process's LIST+WATCH on every SecretSync whose object has ``Ready=True``; "the Popen" is the
``subprocess.Popen`` of ``python -m secretferry.cli run`` in ``OperatorProcess.start``, the clock
being read just before ``start_operator`` builds it:

- create: N divided by the time from the first of the N POSTs (48 in flight) to the last answer.
- op live: from just before the Popen to the first 200 from the operator's ``/healthz`` (polled
  every 0.2 s).
- all Ready: from just before the Popen to the latest "seen Ready" of the N SecretSyncs and the
  mid-storm one.
- new mid-storm / new idle / new after restart: from just before the POST that creates it to its
  "seen Ready". Mid-storm is POSTed as soon as the operator is live ("at +x s" after the Popen),
  idle 1 s after all were Ready, after-restart as soon as the restarted operator is live.
- restart cycle: from just before the restarted operator's Popen to the first poll of its
  ``/metrics`` (every 0.5 s, so 0.5 s resolution) where ``secretferry_syncs_total`` >= N + 3.
- lists/logins start and restart: the dev server's counters, reset just before the Popen, read when
  all are seen Ready (start) and at the end of the restart cycle.
- lists/cycle: list calls over a ``--window`` s window that opens once the periodic operator has
  settled, divided by the cycles in it (its reconciles / (N + 3)).
- RSS / peak and op CPU start: VmRSS / VmHWM and utime + stime of the operator process, read once
  all are seen Ready; RSS after restart at the end of the restart cycle.
- ``--rest`` first Secret: from just before the Popen to the first ADDED event of this process's
  watch on the managed Secrets (label selector, every namespace). RSS at rest: VmRSS once all N are
  seen Ready, ``secretferry_syncs_total`` has stopped moving for 3 s, and 5 s more have passed.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _common import (
    MANAGED_SELECTOR,
    SYNCS_PATH,
    Api,
    Env,
    RunInfo,
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
    peak_rss_mib,
    rss_mib,
    safe_metrics,
    secret_sync_body,
    table,
)
from secretferry.devcluster.operator_process import OperatorProcess


def scope_path(j: int) -> str:
    return f"/scale/s{j:03d}"


async def settle(op: OperatorProcess, at_least: float, *, limit_s: float, quiet: float = 3.0) -> float | None:
    """Wait until secretferry_syncs_total >= at_least and unchanged for ``quiet`` s; returns the
    monotonic time it first reached ``at_least`` (None on timeout)."""
    deadline = time.monotonic() + limit_s
    reached: float | None = None
    last, last_change = -1.0, time.monotonic()
    while time.monotonic() < deadline:
        total = metric(safe_metrics(op), "secretferry_syncs_total")
        now = time.monotonic()
        if total != last:
            last, last_change = total, now
        if reached is None and total >= at_least:
            reached = now
        if reached is not None and (now - last_change >= quiet or now - reached > 15):
            return reached
        await asyncio.sleep(0.5)
    return reached


_STATUS_RESOURCES = ("secretsyncs", "clustermachineidentities", "machineidentities")


async def status_writes(api: Api) -> dict[str, float]:
    """Status PATCHes the apiserver has answered so far, per resource (its own
    ``apiserver_request_total``): what the operator's status writes cost the control plane."""
    async with api.session.get("/metrics") as resp:
        text = await resp.text()
    found = dict.fromkeys(_STATUS_RESOURCES, 0.0)
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        head, _, value = line.rpartition(" ")
        if 'verb="PATCH"' not in head or 'subresource="status"' not in head:
            continue
        for resource in _STATUS_RESOURCES:
            if f'resource="{resource}"' in head:
                found[resource] += float(value)
    return found


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {k: int(after[k] - before[k]) for k in after}


async def run_case(n: int, s: int, args: argparse.Namespace, run: RunInfo) -> dict[str, Any]:
    secrets = [
        {"environment": "dev", "path": scope_path(j), "key": f"KEY_{k}", "value": f"value-{j}-{k}"}
        for j in range(s)
        for k in range(args.keys)
    ]
    r: dict[str, Any] = {"N": n, "S": s}
    with environment(secrets=secrets, run=run, keep=args.keep) as env:
        api = Api(env.cp)
        try:
            await _run_case(env, api, n, s, args, r)
        finally:
            await api.close()
    return r


async def _run_case(env: Env, api: Api, n: int, s: int, args: argparse.Namespace, r: dict[str, Any]) -> None:
    namespaces = [f"bench-{i}" for i in range(max(1, min(args.namespaces, n)))]
    await api.gather_limited(
        [
            lambda ns=ns: api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in namespaces
        ]
    )
    names = [(namespaces[i % len(namespaces)], f"sync-{i:05d}", scope_path(i % s)) for i in range(n)]
    started = time.monotonic()
    await api.gather_limited(
        [lambda ns=ns, nm=nm, p=p: api.create(secret_sync_body(ns, nm, path=p)) for ns, nm, p in names]
    )
    r["create"] = f"{n / (time.monotonic() - started):.0f}/s"
    log(f"N={n} S={s}: created {n} SecretSyncs ({r['create']})")

    tracker = SyncTracker()
    watch = asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced))
    try:
        await tracker.synced.wait()
        await _phases(env, api, tracker, n, s, namespaces, args, r)
    finally:
        watch.cancel()


async def _phases(
    env: Env,
    api: Api,
    tracker: SyncTracker,
    n: int,
    s: int,
    namespaces: list[str],
    args: argparse.Namespace,
    r: dict[str, Any],
) -> None:
    # --- start-up -------------------------------------------------------------------------------
    env.service.reset_stats()
    r["load_start"] = load()
    writes0 = await status_writes(api)
    t0 = time.monotonic()
    op = await asyncio.to_thread(env.start_operator, "op-start")
    pid = op_pid(op)
    r["live"] = time.monotonic() - t0
    storm_key = (namespaces[0], "new-mid-storm")
    created = time.monotonic()
    await api.create(secret_sync_body(*storm_key, path=scope_path(0)))
    r["storm_created_after"] = created - t0
    storm_ready = await tracker.wait_ready(storm_key, args.timeout)
    r["new_storm"] = None if storm_ready is None else storm_ready - created
    ok = await tracker.wait_until(lambda: len(tracker.ready) >= n + 1, args.timeout)
    if ok:
        r["all_ready"] = max(tracker.first_ready.values()) - t0
    else:
        r["all_ready"] = None
        log(f"only {len(tracker.ready)} of {n + 1} Ready after {args.timeout} s")
    r["rss"], r["peak_rss"] = rss_mib(pid), peak_rss_mib(pid)
    r["cpu_start"] = cpu_seconds(pid)
    text = safe_metrics(op)
    r["reconciles_start"] = metric(text, "secretferry_syncs_total")
    dur_sum, dur_count = (
        metric(text, "secretferry_sync_duration_seconds_sum"),
        metric(text, "secretferry_sync_duration_seconds_count"),
    )
    r["sync_mean"] = dur_sum / dur_count if dur_count else float("nan")
    r["results_start"] = {
        res: metric(text, "secretferry_syncs_total", f'result="{res}"')
        for res in ("written", "unchanged", "service", "identity", "target", "error")
    }
    stats = env.service.stats()
    r["lists_start"], r["logins_start"] = stats["listSecrets"], stats["logins"]
    r["streams"] = stats["openStreams"]
    r["status_writes_start"] = _delta(await status_writes(api), writes0)
    log(f"N={n} S={s}: all Ready {fmt_s(r['all_ready'])}, new mid-storm {fmt_ms(r['new_storm'])}")

    # --- a new SecretSync once all are Ready ---------------------------------------------------------
    await asyncio.sleep(1.0)
    calm_key = (namespaces[-1], "new-when-idle")
    created = time.monotonic()
    await api.create(secret_sync_body(*calm_key, path=scope_path(s - 1)))
    calm_ready = await tracker.wait_ready(calm_key, 60)
    r["new_idle"] = None if calm_ready is None else calm_ready - created
    r["load_ready"] = load()
    total = n + 2

    # --- restart cycle -------------------------------------------------------------------------------
    op.stop()
    env.service.reset_stats()
    t0 = time.monotonic()
    op = await asyncio.to_thread(env.start_operator, "op-restart")
    # A new SecretSync right after the restart: now N Secrets exist, so the operator also lists
    # them (its target cache) while the new one waits.
    restart_key = (namespaces[len(namespaces) // 2], "new-after-restart")
    created = time.monotonic()
    await api.create(secret_sync_body(*restart_key, path=scope_path(s // 2)))
    r["restart_created_after"] = created - t0
    restart_ready = await tracker.wait_ready(restart_key, args.timeout)
    r["new_restart"] = None if restart_ready is None else restart_ready - created
    total += 1
    reached = await settle(op, total, limit_s=args.timeout)
    r["restart_all"] = None if reached is None else reached - t0
    stats = env.service.stats()
    r["lists_restart"], r["logins_restart"] = stats["listSecrets"], stats["logins"]
    text = safe_metrics(op)
    r["reconciles_restart"] = metric(text, "secretferry_syncs_total")
    r["writes_restart"] = metric(text, "secretferry_target_writes_total")  # the new SecretSync's is one
    r["rss_restart"] = rss_mib(op_pid(op))
    log(f"N={n} S={s}: restart cycle {fmt_s(r['restart_all'])}, lists {r['lists_restart']}")
    op.stop()

    # --- periodic cycle --------------------------------------------------------------------------
    if args.no_periodic:
        return
    keys = sorted(tracker.known)
    await api.gather_limited(
        [lambda k=k: api.merge_patch_sync(k[0], k[1], {"spec": {"refreshInterval": "20s"}}) for k in keys]
    )
    op = await asyncio.to_thread(
        env.start_operator, "op-periodic", SECRETFERRY_STREAMING_REFRESH_INTERVAL_SECONDS="20"
    )
    await settle(op, total, limit_s=args.timeout)  # includes the observedGeneration status patches
    pid = op_pid(op)
    env.service.reset_stats()
    writes0 = await status_writes(api)
    summaries0 = metric(safe_metrics(op), "secretferry_identity_summary_writes_total")
    c0, cpu0, w0 = metric(safe_metrics(op), "secretferry_syncs_total"), cpu_seconds(pid), time.monotonic()
    r["load_periodic"] = load()
    await asyncio.sleep(args.window)
    text = safe_metrics(op)
    c1, cpu1, w1 = metric(text, "secretferry_syncs_total"), cpu_seconds(pid), time.monotonic()
    stats = env.service.stats()
    r["status_writes_window"] = _delta(await status_writes(api), writes0)
    r["summary_writes_window"] = metric(text, "secretferry_identity_summary_writes_total") - summaries0
    cycles = (c1 - c0) / total
    r["cycles"] = cycles
    r["lists_window"], r["logins_window"] = stats["listSecrets"], stats["logins"]
    r["lists_per_cycle"] = stats["listSecrets"] / cycles if cycles else float("nan")
    r["cpu_idle_pct"] = 100 * (cpu1 - cpu0) / (w1 - w0)
    r["rss_periodic"], r["peak_rss_periodic"] = rss_mib(pid), peak_rss_mib(pid)
    r["results_window"] = {
        res: metric(text, "secretferry_syncs_total", f'result="{res}"')
        for res in ("written", "unchanged", "service", "error")
    }
    log(f"N={n} S={s}: {cycles:.2f} cycles in {w1 - w0:.0f} s, {stats['listSecrets']} lists")
    op.stop()


# Figures at rest: a few seconds after the last reconcile, so what is measured is what stays resident.
REST_QUIET_SECONDS = 5.0


async def rest_case(n: int, args: argparse.Namespace, run: RunInfo) -> dict[str, Any]:
    """N SecretSyncs (over min(N, 10) scopes) created before the operator starts; the operator's
    time to its first Secret, then its RSS once all are Ready and it has been quiet for a while."""
    s = min(n, 10)
    secrets = [
        {"environment": "dev", "path": scope_path(j), "key": "KEY", "value": f"v{j}"} for j in range(s)
    ]
    r: dict[str, Any] = {"N": n}
    with environment(secrets=secrets, run=run, keep=args.keep) as env:
        api = Api(env.cp)
        try:
            namespaces = [f"rest-{i}" for i in range(min(args.namespaces, n))]
            await api.gather_limited(
                [
                    lambda ns=ns: api.create(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                    )
                    for ns in namespaces
                ]
            )
            await api.gather_limited(
                [
                    lambda i=i: api.create(
                        secret_sync_body(
                            namespaces[i % len(namespaces)], f"sync-{i:05d}", path=scope_path(i % s)
                        )
                    )
                    for i in range(n)
                ]
            )
            written: list[float] = []
            tracker, secrets_synced = SyncTracker(), asyncio.Event()
            watches = [
                asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced)),
                asyncio.create_task(
                    api.watch(
                        "/api/v1/secrets",
                        lambda typ, obj: written.append(time.monotonic()),
                        secrets_synced,
                        label_selector=MANAGED_SELECTOR,
                    )
                ),
            ]
            try:
                await tracker.synced.wait()
                await secrets_synced.wait()
                t0 = time.monotonic()
                op = await asyncio.to_thread(env.start_operator, "op-rest")
                await tracker.wait_until(lambda: bool(written), args.timeout)
                r["first_secret"] = written[0] - t0 if written else None
                await tracker.wait_until(lambda: len(tracker.ready) >= n, args.timeout)
                await settle(op, n, limit_s=args.timeout)
                await asyncio.sleep(REST_QUIET_SECONDS)
                r["rss"] = rss_mib(op_pid(op))
                op.stop()
            finally:
                for task in watches:
                    task.cancel()
        finally:
            await api.close()
    log(f"N={n}: first Secret {fmt_s(r['first_secret'])}, RSS at rest {r['rss']:.0f} MiB")
    return r


def report_rest(results: list[dict[str, Any]], run: RunInfo) -> None:
    sizes = " and ".join(str(r["N"]) for r in results)
    print()
    print(run.header())
    print(
        f"resident memory at rest with {sizes} SecretSyncs: "
        + ", ".join(f"{r['rss']:.0f} MiB" for r in results)
    )
    print(
        "time from process start to the first Secret written: "
        + ", ".join(f"{fmt_s(r['first_secret'])} (N={r['N']})" for r in results)
    )


def report(results: list[dict[str, Any]], args: argparse.Namespace, run: RunInfo) -> None:
    headers = [
        "N",
        "S",
        "create",
        "op live",
        "all Ready",
        "new mid-storm",
        "new idle",
        "new after restart",
        "lists/logins start",
        "restart cycle",
        "lists/logins restart",
        "lists/cycle (20s)",
        "RSS / peak MiB",
        "op CPU start",
        "load start→ready",
    ]
    rows = []
    for r in results:
        periodic = (
            "-"
            if args.no_periodic or "lists_per_cycle" not in r
            else f"{r['lists_per_cycle']:.1f} ({r['lists_window']} in {r['cycles']:.1f} cyc)"
        )
        rows.append(
            [
                r["N"],
                r["S"],
                r["create"],
                fmt_s(r["live"]),
                fmt_s(r["all_ready"]),
                fmt_ms(r["new_storm"]) + f" (at +{r['storm_created_after']:.1f}s)",
                fmt_ms(r["new_idle"]),
                fmt_ms(r.get("new_restart")) + f" (at +{r.get('restart_created_after', 0):.1f}s)",
                f"{r['lists_start']}/{r['logins_start']}",
                fmt_s(r["restart_all"]),
                f"{r['lists_restart']}/{r['logins_restart']}",
                periodic,
                f"{r['rss']:.0f} / {r['peak_rss']:.0f}",
                f"{r['cpu_start']:.1f} s",
                f"{r['load_start']} → {r['load_ready']}",
            ]
        )
    print()
    print(run.header())
    print("Issue 4: operator scale (real control plane + dev server + operator process; 2 shared cores)")
    print("targets: 10,000 all Ready < 60 s; new one < 1 s; lists per cycle = S; RSS < 200 MiB")
    print(table(headers, rows))
    print()
    for r in results:
        extra = (
            f"  N={r['N']} S={r['S']}: reconciles start={r['reconciles_start']:.0f} "
            f"{ {k: int(v) for k, v in r['results_start'].items() if v} }, "
            f"mean sync {r['sync_mean'] * 1000:.1f} ms, "
            f"open streams {r['streams']}, reconciles restart={r['reconciles_restart']:.0f} "
            f"(writes {r['writes_restart']:.0f}, one of them the new SecretSync's), "
            f"RSS after restart {r['rss_restart']:.0f} MiB"
        )
        if "cpu_idle_pct" in r:
            extra += (
                f", periodic: CPU {r['cpu_idle_pct']:.0f}% of a core, RSS {r['rss_periodic']:.0f}/"
                f"{r['peak_rss_periodic']:.0f} MiB, logins {r['logins_window']}, load {r['load_periodic']}"
            )
        print(extra)
        writes = f"  N={r['N']} S={r['S']}: status PATCHes start {r.get('status_writes_start')}"
        if "status_writes_window" in r:
            writes += (
                f"; periodic window ({args.window:.0f} s, {r['lists_window']} lists):"
                f" {r['status_writes_window']}, identity summaries {r['summary_writes_window']:.0f}"
            )
        print(writes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100,1000", help="comma-separated N (e.g. 100,1000,10000)")
    p.add_argument("--scopes", default="10,100", help="comma-separated S")
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--keys", type=int, default=5, help="secrets per scope")
    p.add_argument("--timeout", type=float, default=300.0, help="per phase, seconds")
    p.add_argument("--window", type=float, default=45.0, help="periodic-cycle measurement window, s")
    p.add_argument("--no-periodic", action="store_true", help="skip the 20 s periodic-cycle phase")
    p.add_argument("--quick", action="store_true", help="N=100, S=10, short window (< 2 min)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    p.add_argument(
        "--rest",
        metavar="SIZES",
        help="only RSS at rest and time to the first Secret, for these comma-separated N (e.g. 10,100)",
    )
    add_control_plane_option(p)
    args = p.parse_args()
    run = RunInfo(args.control_plane)
    if args.rest:
        report_rest([asyncio.run(rest_case(int(x), args, run)) for x in args.rest.split(",") if x], run)
        return
    if args.quick:
        args.sizes, args.scopes, args.window = "100", "10", 25.0
    sizes = [int(x) for x in args.sizes.split(",") if x]
    scopes = [int(x) for x in args.scopes.split(",") if x]
    results = []
    for n in sizes:
        for s in scopes:
            if s > n:
                continue
            results.append(asyncio.run(run_case(n, s, args, run)))
    report(results, args, run)


if __name__ == "__main__":
    main()
