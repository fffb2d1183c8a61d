"""Issue 12, item 4: canary change -> Secret latency with and without a template bomb present.

Real control plane, dev server and ``secretferry run`` (default template limits: 1 s CPU, 5 s wall
clock, 64 MiB, 1 MiB output, 2 workers). Two canary SecretSyncs in namespace ``bench-canary`` read
one scope: ``plain`` (no template) and ``templated`` (its value through a template, so it needs
the template workers the bombs are busy with). A secret of that scope is changed ``--changes``
times; latency = from the admin write returning to our watch on the managed Secrets seeing the
new value.

Then, in namespace ``bench-nasty``, SecretSyncs with template bombs that read the *same* scope
(so every change renders them again, with new inputs, next to the canary): a CPU bomb (10^8 loop
iterations), a memory bomb (a string doubled towards 2^30 characters) and the issue's
range(100000) x range(10000) bomb; ``--bombs`` of each. The same changes again. A bomb that hit
its limit is quarantined (not rendered again for 10 s, doubling), so a third phase has the tenant
edit every bomb before each change: the worst case, a full CPU budget burnt per change.

Issue 20, item 3 (``--reapply-bombs N``): N CPU-bomb SecretSyncs in ``bench-nasty`` (reading the
canary's scope too), each re-applied with a new nonce in a template comment every
``--reapply-every`` s (6) by a task of this process — an edit lifts the quarantine, so every one
of them wants a render again. Measured after two rounds of re-applies, while they go on. Before
the fix they held all 32 reconcile slots waiting for their namespace's template worker and the
template-free canary waited seconds; the target is the ``plain`` canary's p99 under 1 s.
``--bombs 0`` skips the issue 12 bomb phases.

Throughout, /healthz is probed every 0.2 s with the kubelet's default 1 s timeout.

Run: ``.venv/bin/python bench/bench_template_bomb.py [--changes 40 --bombs 1]``;
issue 20: ``... --bombs 0 --reapply-bombs 40`` (and ``200``).
(``--quick``: 15 changes per phase; about a minute). ``--control-plane production``: the binaries'
default control-plane settings instead of ``tuned``. The report starts with the machine, its load,
the commit and the control plane's profile and flags.

Clocks (``time.monotonic()`` in this process), per phase:

- p50 / p95 / p99 / max per canary: from the admin write of the new value (the dev server's
  ``PUT /_admin/secrets``, run in a thread) *returning* to the arrival of the first event of this
  process's LIST+WATCH on the managed Secrets of ``bench-canary`` whose Secret holds the new value
  (``VALUE`` for ``plain``, ``value.txt`` for ``templated``); both canaries from the same write. In
  the third phase the bomb edits are sent and answered before the write, outside the clock. The
  next change is written ``--gap`` s after both canaries were seen.
- /healthz failed / slowest probe: one probe 0.2 s after the previous one ended, each with a 1 s
  timeout; a failure is an error, a status other than 200 or no answer within 1 s; the slowest is
  the longest from sending a probe to its outcome, over the phase.
- op CPU: the operator process's utime + stime over the phase's wall time; worker CPU: the CPU
  seconds of its children (the template workers: reaped ones and live ones) over the phase.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import (
    CLK_TCK,
    CLUSTER_IDENTITY,
    MANAGED_SELECTOR,
    PROJECT_ID,
    SYNCS_PATH,
    Api,
    RunInfo,
    SyncTracker,
    add_control_plane_option,
    cpu_seconds,
    decode,
    environment,
    fmt_ms,
    load,
    log,
    op_pid,
    percentile,
    table,
)

CANARY_NS = "bench-canary"
NASTY_NS = "bench-nasty"
PATH = "/canary"
KEY = "VALUE"
OUT = "value.txt"
CANARIES = {"plain": None, "templated": {"data": {OUT: "{{ VALUE }}"}}}
BOMBS = {
    "cpu": "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
    "memory": "{% set ns = namespace(s='x' * 1000000) %}"
    "{% for i in range(11) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "range": "{% for i in range(100000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}",
}


def sync_body(namespace: str, name: str, template: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "identityRef": {"kind": "ClusterMachineIdentity", "name": CLUSTER_IDENTITY},
        "sources": [{"projectId": PROJECT_ID, "environment": "dev", "path": PATH}],
    }
    if template is not None:
        spec["target"] = {"template": template}
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class Seen:
    """When each (Secret, value) was first seen by our watch of the canary's managed Secrets."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], float] = {}
        self.synced = asyncio.Event()

    def handle(self, typ: str, obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        value = decode(obj, KEY if name == "plain" else OUT)
        if typ != "DELETED" and value is not None:
            self.at.setdefault((name, value), time.monotonic())

    async def wait(self, name: str, value: str, limit_s: float) -> float | None:
        """When the value was seen (the watch runs in this loop, so polling costs ~nothing)."""
        deadline = time.monotonic() + limit_s
        while (name, value) not in self.at and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        return self.at.get((name, value))


class Prober:
    """/healthz every 0.2 s (1 s timeout, as the kubelet's default) in a thread of its own."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.probes = self.failures = 0
        self.slowest = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            ok = await asyncio.to_thread(self._probe)
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.probes += 1
            self.failures += 0 if ok else 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    def _probe(self) -> bool:
        try:
            with urllib.request.urlopen(self.url, timeout=1.0) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


def children_cpu_seconds(pid: int) -> float:
    """CPU of the operator's children, the template workers: the reaped ones (cutime + cstime)
    and the live ones."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / CLK_TCK
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                total += cpu_seconds(int(stat.parent.name))
    return total


async def phase(
    env: Any, seen: Seen, op: Any, label: str, args: argparse.Namespace, *, edit: Any = None
) -> dict[str, Any]:
    pid = op_pid(op)
    prober, stop = Prober(op.liveness_port), asyncio.Event()
    probing = asyncio.create_task(prober.run(stop))
    cpu0, workers0, t0, load0 = cpu_seconds(pid), children_cpu_seconds(pid), time.monotonic(), load()
    latency: dict[str, list[float]] = {name: [] for name in CANARIES}
    timeouts = 0
    for i in range(args.changes):
        value = f"{label}-{i}-{time.monotonic_ns() % 10**9:09d}"
        if edit is not None:
            await edit(i)
        await asyncio.to_thread(env.service.set_secret, PROJECT_ID, "dev", PATH, KEY, value)
        written = time.monotonic()
        for name in CANARIES:
            at = await seen.wait(name, value, args.change_timeout)
            if at is None:
                timeouts += 1
                log(f"{label} change {i}: {name} did not get the value in {args.change_timeout} s")
            else:
                latency[name].append(at - written)
        await asyncio.sleep(args.gap)
    seconds = time.monotonic() - t0
    stop.set()
    await probing
    return {
        "label": label,
        "latency": latency,
        "timeouts": timeouts,
        "probes": prober.probes,
        "probe_failures": prober.failures,
        "slowest_probe": prober.slowest,
        "op_cpu_pct": 100 * (cpu_seconds(pid) - cpu0) / seconds,
        "worker_cpu_s": children_cpu_seconds(pid) - workers0,
        "load": f"{load0} -> {load()}",
    }


async def main_async(args: argparse.Namespace, run: RunInfo) -> None:
    secrets = [{"environment": "dev", "path": PATH, "key": KEY, "value": "v0"}]
    results: list[dict[str, Any]] = []
    bomb_status: dict[str, str] = {}
    with environment(secrets=secrets, run=run, keep=args.keep) as env:
        api = Api(env.cp)
        tasks: list[asyncio.Task[None]] = []
        try:
            for ns in (CANARY_NS, NASTY_NS):
                await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for name, template in CANARIES.items():
                await api.create(sync_body(CANARY_NS, name, template))
            tracker, seen = SyncTracker(), Seen()
            tasks.append(asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced)))
            secrets_path = f"/api/v1/namespaces/{CANARY_NS}/secrets"
            tasks.append(
                asyncio.create_task(
                    api.watch(secrets_path, seen.handle, seen.synced, label_selector=MANAGED_SELECTOR)
                )
            )
            op = await asyncio.to_thread(env.start_operator, "op-bomb")
            for name in CANARIES:
                if await tracker.wait_ready((CANARY_NS, name), 120) is None:
                    raise RuntimeError(f"canary {name} never became Ready")
            await asyncio.sleep(2.0)  # the start-up tail
            results.append(await phase(env, seen, op, "no bomb", args))
            log(f"no bomb: templated p50 {fmt_ms(percentile(results[-1]['latency']['templated'], 50))}")

            kinds = args.kinds.split(",") if args.bombs else []
            for kind in kinds:
                bomb = BOMBS[kind]
                for n in range(args.bombs):
                    template = {"data": {"ok.txt": "{{ VALUE }}", "bomb.txt": bomb}}
                    await api.create(sync_body(NASTY_NS, f"{kind}-bomb-{n}", template))
            names = [f"{kind}-bomb-{n}" for kind in kinds for n in range(args.bombs)]
            got = await tracker.wait_until(lambda: all((NASTY_NS, n) in tracker.known for n in names), 60)
            if not got:
                raise RuntimeError("the bombs were not seen")
            if names:
                await asyncio.sleep(3.0)  # their first renders
                results.append(await phase(env, seen, op, "bombs present", args))

            async def edit(i: int) -> None:
                """The worst case: every bomb is a new template, so none is quarantined."""
                for kind in kinds:
                    for n in range(args.bombs):
                        bomb = BOMBS[kind] + f"{{# edit {i} #}}"
                        patch = {"spec": {"target": {"template": {"data": {"bomb.txt": bomb}}}}}
                        await api.merge_patch_sync(NASTY_NS, f"{kind}-bomb-{n}", patch)

            if args.edit_bombs and args.bombs:
                results.append(await phase(env, seen, op, "bombs edited per change", args, edit=edit))
            if args.reapply_bombs:
                results.append(await reapplied_phase(api, env, seen, op, tracker, args, bomb_status))
            for name in names:
                obj = await api.request(
                    "GET", f"/apis/secretferry.io/v1alpha1/namespaces/{NASTY_NS}/secretsyncs/{name}"
                )
                ready = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
                bomb_status[name] = f"{ready[0]['reason']}: {ready[0]['message']}" if ready else "no status"
        finally:
            for task in tasks:
                task.cancel()
            await api.close()
    report(results, bomb_status, args, run)


async def reapplied_phase(
    api: Api,
    env: Any,
    seen: Seen,
    op: Any,
    tracker: SyncTracker,
    args: argparse.Namespace,
    bomb_status: dict[str, str],
) -> dict[str, Any]:
    """Issue 20's attack: ``--reapply-bombs`` CPU bombs, each re-applied with a new nonce every
    ``--reapply-every`` s while the canary's changes are measured."""
    count, every = args.reapply_bombs, args.reapply_every
    names = [f"reapplied-{n}" for n in range(count)]

    def template(nonce: int) -> dict[str, Any]:
        return {"data": {"ok.txt": "{{ VALUE }}", "bomb.txt": BOMBS["cpu"] + f"{{# nonce {nonce} #}}"}}

    for name in names:
        await api.create(sync_body(NASTY_NS, name, template(0)))
    if not await tracker.wait_until(lambda: all((NASTY_NS, n) in tracker.known for n in names), 120):
        raise RuntimeError("the re-applied bombs were not seen")
    rounds: list[float] = []

    async def reapply() -> None:
        nonce = 0
        while True:
            started = time.monotonic()
            nonce += 1
            for name in names:
                patch = {"spec": {"target": {"template": template(nonce)}}}
                await api.merge_patch_sync(NASTY_NS, name, patch)
            rounds.append(time.monotonic() - started)
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))

    task = asyncio.create_task(reapply())
    try:
        await asyncio.sleep(2 * every)  # two rounds: the queue is as full as it gets
        label = f"{count} bombs re-applied every {every:g} s"
        result = await phase(env, seen, op, label, args)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    log(f"{label}: {len(rounds)} re-apply rounds, slowest {max(rounds, default=0):.2f} s")
    reasons: dict[str, int] = {}
    for name in names:
        obj = await api.request(
            "GET", f"/apis/secretferry.io/v1alpha1/namespaces/{NASTY_NS}/secretsyncs/{name}"
        )
        ready = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
        reason = ready[0]["reason"] if ready else "no status"
        reasons[reason] = reasons.get(reason, 0) + 1
    bomb_status[f"{count} re-applied bombs"] = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    return result


def report(
    results: list[dict[str, Any]], bomb_status: dict[str, str], args: argparse.Namespace, run: RunInfo
) -> None:
    headers = [
        "phase",
        "canary",
        "changes",
        "p50",
        "p95",
        "p99",
        "max",
        "timeouts",
        "/healthz failed",
        "slowest probe",
    ]
    headers += ["op CPU", "worker CPU", "load"]
    rows = []
    for r in results:
        for name, values in r["latency"].items():
            rows.append(
                [
                    r["label"],
                    name,
                    len(values),
                    fmt_ms(percentile(values, 50)),
                    fmt_ms(percentile(values, 95)),
                    fmt_ms(percentile(values, 99)),
                    fmt_ms(max(values, default=float("nan"))),
                    r["timeouts"],
                    f"{r['probe_failures']}/{r['probes']}",
                    fmt_ms(r["slowest_probe"]),
                    f"{r['op_cpu_pct']:.0f}%",
                    f"{r['worker_cpu_s']:.1f} s",
                    r["load"],
                ]
            )
    print()
    print(run.header())
    print(
        f"Issue 12 item 4 / issue 20 item 3: canary change -> Secret, {args.changes} changes per phase,"
        f" {args.bombs} bomb(s) of each kind, {args.reapply_bombs} re-applied every {args.reapply_every:g} s,"
        " reading the canary's scope (2 shared cores)"
    )
    print(table(headers, rows))
    for name, status in bomb_status.items():
        print(f"  {name}: {status}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--bombs", type=int, default=1, help="SecretSyncs of each bomb kind")
    p.add_argument("--kinds", default=",".join(BOMBS), help=f"bomb kinds, of {', '.join(BOMBS)}")
    p.add_argument("--gap", type=float, default=0.5, help="pause between changes, s")
    p.add_argument(
        "--edit-bombs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="third phase: the tenant edits every bomb before each change (no quarantine)",
    )
    p.add_argument(
        "--reapply-bombs",
        type=int,
        default=0,
        help="issue 20: a phase with this many CPU bombs re-applied with a new nonce (40, 200)",
    )
    p.add_argument("--reapply-every", type=float, default=6.0, help="seconds between re-applies of each bomb")
    p.add_argument("--change-timeout", type=float, default=30.0)
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    p.add_argument("--quick", action="store_true", help="15 changes per phase")
    add_control_plane_option(p)
    args = p.parse_args()
    if args.quick:
        args.changes = 15
    asyncio.run(main_async(args, RunInfo(args.control_plane)))


if __name__ == "__main__":
    main()
