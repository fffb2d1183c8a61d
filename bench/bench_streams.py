"""Change-to-Secret latency through the event streams, per event-stream generation, and polling.

Real control plane, dev server (default heartbeat) and ``secretferry run``. 1,000 SecretSyncs on
one project across 20 scopes (distinct paths in the ``dev`` environment, one ClusterMachineIdentity),
so 50 SecretSyncs read each scope; odd scopes are recursive and their changes land in a subfolder
(``/streams/sNN/deep``), even ones are exact. Then, one at a time, a secret of a randomly picked
scope is changed at the dev server; latency = from the admin write returning to the moment a watch
on the managed Secrets (label selector, from this process) sees the new value — for one randomly
picked SecretSync of that scope, and for all 50 of them. Reported per generation
(``--event-generation old|middle|newest|documented|all``; each gets a fresh cluster and dev server)
and per kind of scope (exact, recursive).

Before any cluster starts, the registration plan is priced without I/O at 1,000 and 10,000
SecretSyncs: streams and register items per (identity, project) for our per-path plan (both glob
and ``startswith`` forms) against one registration per environment (what Infisical's own clients
do), and the share of the project's folders whose changes each plan makes the server send us.
Nudges do not differ: events are routed to scopes client-side, so over-delivery costs bytes and
parsing, never a list call.

Second run, same objects: every SecretSync patched to ``instantUpdates: false`` (refreshInterval 5s),
i.e. polling, for comparison.

Targets (streaming): p50 < 100 ms, p99 < 1 s, open streams <= 5.

Run: ``.venv/bin/python bench/bench_streams.py [--event-generation all] [--syncs 1000 --scopes 20
--changes 200 --poll-changes 40]`` (``--quick``: 200 SecretSyncs, 30 streamed changes, 8 polled ones;
under 2 minutes per generation; ``--plan-only``: the plan prices alone). ``--control-plane
production``: the binaries' default control-plane settings instead of ``tuned``. The report starts
with the machine, its load, the commit and the control plane's profile and flags, then the plans.

Clocks (``time.monotonic()`` in this process). "Seen" is the arrival of the first event of this
process's LIST+WATCH on the managed Secrets of the namespace (label selector) that carries the new
value in that Secret; "the admin write" is the dev server's ``PUT /_admin/secrets`` (run in a
thread), which also emits the change's events:

- one p50 / p95 / p99 / max, exact and recursive: from the admin write *returning* to "seen" for one
  SecretSync picked at random among the 50 of the changed scope.
- "from the admin call START": the same, from just before the admin write is sent.
- all-of-scope: from the admin write returning to the latest "seen" among all 50 Secrets of the
  scope. The next change is written ``--gap`` s after that.
- start-up all Ready: from just before the Popen of ``python -m secretferry.cli run`` to the latest
  arrival of a SecretSync watch event with ``Ready=True`` (first one per SecretSync); all Streaming:
  from the same point to the first 0.2 s poll at which every SecretSync's ``status.updateMode`` is
  ``Streaming`` (0.2 s resolution).
- switch to polling: from the last merge patch (``instantUpdates: false``) answering to the first
  0.2 s poll at which every SecretSync's ``updateMode`` is ``Polling``.
- lists, logins, opened: the dev server's counters, reset just before the first change of the run;
  open streams: its gauge at the end of the run. op CPU: the operator's utime + stime over the run's
  wall time. The plan table has no clock (pure computation).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

from _common import (
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
    safe_metrics,
    table,
    watch_syncs_and_secrets,
)

NAMESPACE = "bench-streams"
KEY = "VALUE"


GENERATIONS = ("documented", "old", "middle", "newest")
SCOPES = ScopeLayout("/streams")


# --- the plan, priced without I/O -----------------------------------------------------------------------
def plan_prices() -> list[list[Any]]:
    """Streams, register items and delivered share for the per-path plan and per-environment one."""
    from secretferry.service import scopes as scope_mod
    from secretferry.service import streamplan

    def delivered(regs: list[Any], folders: list[tuple[str, str]]) -> float:
        def glob(pattern: str, env: str, folder: tuple[str, str]) -> bool:
            if folder[0] != env:
                return False
            if pattern.endswith("/**"):
                return scope_mod.is_within(folder[1], pattern[:-3] or "/")
            return folder[1] == pattern

        def prefix(pattern: str, env: str, folder: tuple[str, str]) -> bool:
            return folder[0] == env and folder[1].startswith(pattern)

        out = []
        for match in (glob, prefix):
            hit = sum(
                1
                for folder in folders
                if any(
                    r.environment_slug is None
                    or match(r.secret_path if r.secret_path is not None else "/", r.environment_slug, folder)
                    for r in regs
                )
            )
            out.append(hit / len(folders))
        return max(out)

    rows: list[list[Any]] = []
    for syncs, scopes_n in ((1000, 2), (1000, 20), (10000, 200)):
        for envs in (1, 3, 8):
            if envs > scopes_n:
                continue
            scope_set = {
                scope_mod.Scope(
                    "id",
                    "p",
                    f"env{j % envs}",
                    f"/team{j % 7}/app{j}",
                    recursive=j % 2 == 1 and scopes_n > 2,  # two exact folders: the precise case
                    include_imports=True,
                )
                for j in range(scopes_n)
            }
            # The project's folders: every scope's folder, its subfolder, and as many unrelated ones.
            folders = [(s.environment, s.path) for s in scope_set]
            folders += [(s.environment, s.path + "/deep") for s in scope_set]
            folders += [(f"env{j % envs}", f"/other{j}") for j in range(2 * scopes_n)]
            per_path = streamplan.plan_registrations(scope_set)
            per_env = streamplan.plan_registrations(
                {scope_mod.Scope("id", "p", f"env{e}", "/", recursive=True) for e in range(envs)}
            )
            for name, plan in (("per path (ours)", per_path), ("per environment", per_env)):
                regs = [r for stream in plan.streams for r in stream]
                rows.append(
                    [
                        syncs,
                        scopes_n,
                        envs,
                        name,
                        len(plan.streams),
                        len(regs),
                        len(plan.uncovered),
                        f"{100 * delivered(regs, folders):.0f}%",
                    ]
                )
    return rows


async def run_changes(
    env: Env,
    watcher: SecretWatcher,
    by_scope: dict[int, list[str]],
    count: int,
    *,
    mode: str,
    args: argparse.Namespace,
    rng: random.Random,
) -> dict[str, Any]:
    op = env.operators[-1]
    pid = op_pid(op)
    env.service.reset_stats()
    m0 = safe_metrics(op)
    cpu0, w0 = cpu_seconds(pid), time.monotonic()
    load0 = load()
    one: list[float] = []
    kinds: list[str] = []
    one_from_call: list[float] = []
    everyone: list[float] = []
    timeouts = consecutive = 0
    aborted = False
    for i in range(count):
        if consecutive >= 3:
            aborted = True
            log(f"{mode}: 3 changes in a row never arrived; giving up on this run")
            break
        j = rng.randrange(len(by_scope))
        names = by_scope[j]
        measured = rng.choice(names)
        value = f"{mode}-{i}-{rng.getrandbits(32):08x}"

        def write(j: int = j, value: str = value) -> tuple[float, float]:
            before = time.monotonic()
            env.service.set_secret(PROJECT_ID, "dev", SCOPES.change_path(j), KEY, value)
            return before, time.monotonic()

        before, written = await asyncio.to_thread(write)
        seen = await watcher.wait(measured, value, args.change_timeout)
        if seen is None:
            timeouts += 1
            consecutive += 1
            log(f"{mode} change {i}: {measured} did not get the value in {args.change_timeout} s")
            continue
        consecutive = 0
        kinds.append(SCOPES.kind(j))
        one.append(seen - written)
        one_from_call.append(seen - before)
        all_seen = await asyncio.gather(*(watcher.wait(n, value, args.change_timeout) for n in names))
        if all(t is not None for t in all_seen):
            everyone.append(max(t for t in all_seen if t is not None) - written)
        else:
            timeouts += 1
        await asyncio.sleep(args.gap)
    w1 = time.monotonic()
    m1 = safe_metrics(op)
    stats = env.service.stats()
    return {
        "mode": mode,
        "changes": count,
        "one": one,
        "kinds": kinds,
        "one_from_call": one_from_call,
        "all": everyone,
        "timeouts": timeouts,
        "aborted": aborted,
        "open_streams": stats["openStreams"],
        "streams_opened": stats["streamsOpened"],
        "lists": stats["listSecrets"],
        "logins": stats["logins"],
        "events_delivered": stats.get("eventsDelivered"),
        "reconciles": metric(m1, "secretferry_syncs_total") - metric(m0, "secretferry_syncs_total"),
        "writes": metric(m1, "secretferry_target_writes_total")
        - metric(m0, "secretferry_target_writes_total"),
        "stream_events": metric(m1, "secretferry_stream_events_total")
        - metric(m0, "secretferry_stream_events_total"),
        "cpu_pct": 100 * (cpu_seconds(pid) - cpu0) / (w1 - w0),
        "seconds": w1 - w0,
        "load": f"{load0} → {load()}",
    }


async def main_async(args: argparse.Namespace, generation: str, run: RunInfo) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    secrets = SCOPES.seed_secrets(args.scopes, KEY)
    results: list[dict[str, Any]] = []
    startup: dict[str, Any] = {}
    devserver_args = ["--event-generation", generation]
    with environment(secrets=secrets, run=run, devserver_args=devserver_args, keep=args.keep) as env:
        api = Api(env.cp)
        tasks: list[asyncio.Task[None]] = []
        try:
            by_scope = await SCOPES.create_syncs(
                api, NAMESPACE, syncs=args.syncs, scopes=args.scopes, refresh="5s"
            )
            tracker, watcher = SyncTracker(), SecretWatcher(KEY)
            await watch_syncs_and_secrets(api, NAMESPACE, tracker, watcher, tasks)

            t0 = time.monotonic()
            await asyncio.to_thread(env.start_operator, "op-streams")
            ok = await tracker.wait_until(lambda: len(tracker.ready) >= args.syncs, args.timeout)
            startup["ready"] = max(tracker.first_ready.values()) - t0 if ok else None
            ok = await tracker.wait_until(
                lambda: sum(1 for m in tracker.mode.values() if m == "Streaming") >= args.syncs, args.timeout
            )
            startup["streaming"] = time.monotonic() - t0 if ok else None
            log(
                f"all Ready after {fmt_s(startup['ready'])}, "
                f"all Streaming after {fmt_s(startup['streaming'])}"
            )
            await asyncio.sleep(2.0)  # let the start-up tail (status patches) drain
            results.append(
                await run_changes(
                    env, watcher, by_scope, args.changes, mode=f"streaming ({generation})", args=args, rng=rng
                )
            )
            log(f"streaming: p50 {fmt_ms(percentile(results[-1]['one'], 50))}")

            if args.poll_changes > 0 and generation == args.generations[-1]:
                await api.gather_limited(
                    [
                        lambda n=n: api.merge_patch_sync(NAMESPACE, n, {"spec": {"instantUpdates": False}})
                        for names in by_scope.values()
                        for n in names
                    ]
                )
                t1 = time.monotonic()
                ok = await tracker.wait_until(
                    lambda: sum(1 for m in tracker.mode.values() if m == "Polling") >= args.syncs,
                    args.timeout,
                )
                startup["polling_switch"] = time.monotonic() - t1 if ok else None
                await tracker.wait_until(lambda: env.service.stats()["openStreams"] == 0, 30, poll=1.0)
                await asyncio.sleep(2.0)
                results.append(
                    await run_changes(
                        env, watcher, by_scope, args.poll_changes, mode="polling", args=args, rng=rng
                    )
                )
        finally:
            for task in tasks:
                task.cancel()
            await api.close()
    for r in results:
        r["startup"] = startup
    return results


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    headers = [
        "mode",
        "changes",
        "exact p50",
        "p99",
        "recursive p50",
        "p99",
        "one p50",
        "p95",
        "p99",
        "max",
        "all-of-scope p50",
        "p95",
        "p99",
        "timeouts",
        "open streams",
        "opened",
        "lists",
        "logins",
        "reconciles",
        "op CPU",
        "load",
    ]
    rows = []
    for r in results:
        exact = [t for t, k in zip(r["one"], r["kinds"], strict=True) if k == "exact"]
        recursive = [t for t, k in zip(r["one"], r["kinds"], strict=True) if k == "recursive"]
        rows.append(
            [
                r["mode"],
                r["changes"],
                fmt_ms(percentile(exact, 50)),
                fmt_ms(percentile(exact, 99)),
                fmt_ms(percentile(recursive, 50)),
                fmt_ms(percentile(recursive, 99)),
                fmt_ms(percentile(r["one"], 50)),
                fmt_ms(percentile(r["one"], 95)),
                fmt_ms(percentile(r["one"], 99)),
                fmt_ms(max(r["one"], default=float("nan"))),
                fmt_ms(percentile(r["all"], 50)),
                fmt_ms(percentile(r["all"], 95)),
                fmt_ms(percentile(r["all"], 99)),
                f"{r['timeouts']}{' (ABORTED)' if r['aborted'] else ''}",
                r["open_streams"],
                r["streams_opened"],
                f"{r['lists']} ({r['lists'] / max(1, r['changes']):.1f}/change)",
                r["logins"],
                f"{r['reconciles']:.0f} ({r['writes']:.0f} writes)",
                f"{r['cpu_pct']:.0f}%",
                r["load"],
            ]
        )
    print()
    print(
        f"{args.syncs} SecretSyncs, {args.scopes} scopes (half recursive), one project; latency = admin "
        "write returned -> our Secret watch sees the value (2 shared cores)"
    )
    print("targets (streaming, every generation): p50 < 100 ms, p99 < 1 s, open streams <= 5")
    for r in results:
        startup = r["startup"]
        print(
            f"start-up ({r['mode']}): all Ready {fmt_s(startup.get('ready'))}, "
            f"all Streaming {fmt_s(startup.get('streaming'))}"
            + (
                f"; switch to polling (patch of all) {fmt_s(startup.get('polling_switch'))}"
                if "polling_switch" in startup and r["mode"] == "polling"
                else ""
            )
        )
    print(table(headers, rows))
    for r in results:
        print(
            f"  {r['mode']}: from the admin call START p50 {fmt_ms(percentile(r['one_from_call'], 50))}; "
            f"stream events {r['stream_events']:.0f}; run took {r['seconds']:.0f} s"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--syncs", type=int, default=1000)
    p.add_argument("--scopes", type=int, default=20)
    p.add_argument("--changes", type=int, default=200, help="streamed changes")
    p.add_argument("--poll-changes", type=int, default=40, help="changes in polling mode (0: skip)")
    p.add_argument("--gap", type=float, default=0.2, help="pause between changes, s")
    p.add_argument("--change-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    p.add_argument("--quick", action="store_true", help="200 SecretSyncs, 30 + 8 changes (< 2 min)")
    p.add_argument("--event-generation", choices=[*GENERATIONS, "all"], default="newest")
    p.add_argument("--plan-only", action="store_true", help="print the plan prices and stop")
    add_control_plane_option(p)
    args = p.parse_args()
    if args.quick:
        args.syncs, args.changes, args.poll_changes, args.change_timeout = 200, 30, 8, 15.0
    args.generations = list(GENERATIONS) if args.event_generation == "all" else [args.event_generation]
    run = RunInfo(None if args.plan_only else args.control_plane)
    plans = table(
        ["SecretSyncs", "scopes", "envs", "plan", "streams", "register items", "polling", "folders sent"],
        plan_prices(),
    )
    results: list[dict[str, Any]] = []
    if not args.plan_only:
        for generation in args.generations:
            results += asyncio.run(main_async(args, generation, run))
    print(run.header())
    print("Registration plans per (identity, project); half the scopes recursive (except with 2 scopes)")
    print(plans)
    if results:
        report(results, args)


if __name__ == "__main__":
    main()
