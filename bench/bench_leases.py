"""Issue 23: lease renewals for 100 DynamicSecretLeases over an hour, compressed by short TTLs.

On a fresh control plane, dev server and throwaway PostgreSQL cluster (``make postgres-deps``), the
operator keeps ``--leases`` DynamicSecretLeases (one namespace, the per-namespace bound raised to
fit) of a ``sql-database`` dynamic secret whose every lease is a real PostgreSQL role. Each asks for
``--ttl`` (the real service's minimum, 60 s, by default) and renews at ``--fraction`` of it, so a
``--duration`` run is an hour of renewals compressed: the default 300 s with 60 s TTLs and 0.5 is
five renewals per lease, as an hour of 12-minute TTLs would be.

Figures, from the dev server's per-route counters and the objects' status at the end:

- renewals (sum of status.renewals) and renew calls: calls per renewal (1.0 = nothing wasted);
- lease creations beyond the first per object and objects not Ready with reason Leased: leases that
  had to be replaced or expired — "renewals missed" (expected 0);
- missed expiries: samples (every 2 s, every object) where status.expiresAt was already past.

Run: ``.venv/bin/python bench/bench_leases.py [--leases 100] [--duration 300] [--ttl 60]``.
Clocks: the duration runs from the moment every object is Ready (``time.monotonic()`` here).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import time
from typing import Any

from _common import (
    CLUSTER_IDENTITY,
    PROJECT_SLUG,
    RunInfo,
    add_control_plane_option,
    environment,
    log,
    table,
)
from secretferry.devserver import pgcluster

NAMESPACE = "leases"
CREATE = "POST /api/v1/dynamic-secrets/leases"
RENEW = "POST /api/v1/dynamic-secrets/leases/{leaseId}/renew"


def lease_body(i: int, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "DynamicSecretLease",
        "metadata": {"name": f"l{i}", "namespace": NAMESPACE},
        "spec": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": CLUSTER_IDENTITY},
            "dynamicSecret": {"name": "bench-db", "projectSlug": PROJECT_SLUG, "environment": "dev"},
            "ttl": f"{int(args.ttl)}s",
            "renewAtFraction": args.fraction,
        },
    }


def statuses(env: Any) -> list[dict[str, Any]]:
    out = env.cp.kubectl("get", "dynamicsecretleases", "-n", NAMESPACE, "-o", "json")
    return [item.get("status") or {} for item in json.loads(out)["items"]]


def ready_reason(st: dict[str, Any]) -> str | None:
    for cond in st.get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("reason"))
    return None


async def run(args: argparse.Namespace, info: RunInfo) -> dict[str, Any]:
    r: dict[str, Any] = {}
    with (
        pgcluster.throwaway_cluster(max_connections=200) as pg,
        environment(secrets=[], run=info, keep=args.keep) as env,
    ):
        env.service.add_seed(
            {
                "projects": [
                    {
                        "slug": PROJECT_SLUG,
                        "dynamicSecrets": [
                            {
                                "name": "bench-db",
                                "environment": "dev",
                                "path": "/",
                                "type": "sql-database",
                                "defaultTTL": "1m",
                                "maxTTL": "24h",
                                "inputs": pg.inputs(),
                            }
                        ],
                    }
                ]
            }
        )
        env.cp.kubectl("create", "namespace", NAMESPACE)
        env.start_operator(
            "operator",
            SECRETFERRY_MAX_LEASES_PER_NAMESPACE=str(args.leases),
            SECRETFERRY_LEASE_RETRY_SECONDS="2",
        )
        started = time.monotonic()
        for i in range(args.leases):
            env.cp.apply(lease_body(i, args))
        while True:
            sts = statuses(env)
            leased = sum(1 for st in sts if ready_reason(st) == "Leased")
            if leased == args.leases:
                break
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"only {leased}/{args.leases} leased after {args.timeout:.0f} s")
            await asyncio.sleep(1)
        r["all_leased_s"] = time.monotonic() - started
        log(f"{args.leases} leases taken in {r['all_leased_s']:.1f} s; running {args.duration:.0f} s")
        env.service.reset_stats()
        begin = time.monotonic()
        late_samples = samples = 0
        while time.monotonic() - begin < args.duration:
            now = datetime.datetime.now(datetime.UTC)
            for st in statuses(env):
                samples += 1
                expires = st.get("expiresAt")
                if expires and datetime.datetime.fromisoformat(expires.replace("Z", "+00:00")) < now:
                    late_samples += 1
            await asyncio.sleep(2)
        stats = env.service.stats()["routes"]
        sts = statuses(env)
        r["renewals"] = sum(int(st.get("renewals") or 0) for st in sts)
        r["renew_calls"] = stats.get(RENEW, 0)
        r["create_calls"] = stats.get(CREATE, 0)
        r["replaced"] = sum(max(int(st.get("leasesTaken") or 1) - 1, 0) for st in sts)
        r["not_leased"] = sum(1 for st in sts if ready_reason(st) != "Leased")
        r["late_samples"], r["samples"] = late_samples, samples
        r["other_calls"] = {k: v for k, v in stats.items() if k not in (RENEW, CREATE)}
    return r


def report(r: dict[str, Any], args: argparse.Namespace, info: RunInfo) -> None:
    print()
    print(info.header())
    print(
        f"{args.leases} DynamicSecretLeases, ttl {int(args.ttl)} s, renewAtFraction {args.fraction}, "
        f"{args.duration:.0f} s measured ({args.duration / args.ttl:.1f} TTLs); "
        f"all leased in {r['all_leased_s']:.1f} s; PostgreSQL roles per lease (real)"
    )
    per = r["renew_calls"] / r["renewals"] if r["renewals"] else float("nan")
    rows = [
        ["renewals (status)", r["renewals"]],
        ["renew calls (dev server)", r["renew_calls"]],
        ["calls per renewal", f"{per:.2f}"],
        ["new leases in the window", r["create_calls"]],
        ["renewals missed (replaced or not Leased)", r["replaced"] + r["not_leased"]],
        ["samples with expiresAt already past", f"{r['late_samples']} of {r['samples']}"],
    ]
    print(table(["figure", "value"], rows))
    print(f"other service calls in the window: {r['other_calls'] or 'none'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--leases", type=int, default=100, help="DynamicSecretLeases (default 100)")
    p.add_argument(
        "--ttl", type=float, default=60.0, help="spec.ttl, s; the service's minimum is 60 (default)"
    )
    p.add_argument("--fraction", type=float, default=0.5, help="spec.renewAtFraction (default 0.5)")
    p.add_argument("--duration", type=float, default=300.0, help="measured window, s (default 300)")
    p.add_argument("--timeout", type=float, default=300.0, help="for all leases to be taken, s")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    add_control_plane_option(p)
    args = p.parse_args()
    reason = pgcluster.unavailable_reason()
    if reason:
        raise SystemExit(reason)
    info = RunInfo(args.control_plane)
    report(asyncio.run(run(args, info)), args, info)


if __name__ == "__main__":
    main()
