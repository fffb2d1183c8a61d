"""Issue 12: logins, list calls and convergence after an outage of the secrets service.

Real control plane, dev server and ``secretferry run`` with its default backoff (1 s doubling to
300 s). ``--identities`` ClusterMachineIdentities (each a service identity of its own, Kubernetes
auth through a real TokenReview) read ``--scopes`` scopes, ``--syncs`` SecretSyncs spread over them.
Every other scope is polled (``instantUpdates: false``, ``--refresh``), so its list calls fail during
the outage and back off; the others are on event streams. Once all are Ready, the service goes
away for ``--outage`` seconds: ``--mode faults`` answers 503 on every API route and drops the open
event streams (the admin API keeps working, so every scope's value is changed half-way through the
outage, and with ``--expire-tokens`` every access token is expired then, so that each identity has
to log in again); ``--mode stop`` stops the dev server process and starts it again on the same
port and SQLite file.

Measured from the moment the service is back: the time until every SecretSync is Ready again and
(faults mode) every Secret holds the value written during the outage; logins and list calls the
service answered in the following ``--window`` seconds; logins during the outage; live access
tokens per identity at the end; the operator's ``secretferry_logins_total``.

Run: ``.venv/bin/python bench/bench_outage.py [--outage 60 --identities 3 --scopes 12 --syncs 120]``
(``--quick``: a 20 s outage and a 30 s window; under 2 minutes). ``--control-plane production``: the
binaries' default control-plane settings instead of ``tuned``. The report starts with the machine,
its load, the commit and the control plane's profile and flags.

Clocks (``time.monotonic()`` in this process). "Back" is, with ``--mode faults``, the moment the
admin call that clears the faults (``DELETE /_admin/faults``) returned; with ``--mode stop``, the
moment the restarted dev server first answered ``/_admin/health`` (polled every 50 ms) and its
start returned. The outage itself lasts ``--outage`` s from the moment the faults were set and
the open streams dropped (faults) or the process had exited (stop), plus the restart (stop).

- time to converge: from "back" to the first 50 ms poll at which this process's watches see every
  SecretSync with ``Ready=True`` and every managed Secret holding the expected value (the one
  written mid-outage with faults; the unchanged one with stop). 50 ms resolution.
- logins / list calls / streams opened / revocations "in the window": the dev server's counters,
  reset just before the faults are cleared (faults) or new with the restarted process (stop), read
  ``--window`` s after "back". Live access tokens per identity: read at that same moment.
- during the outage: the counters from the moment the outage began to just before "back" (stop:
  0, nothing was running to count). Not Ready at the end of the outage: counted just before "back".
- ``secretferry_logins_total``: the operator's counter from just before the outage to the end of
  the window. Logins before the outage: counted from the dev server's start to 3 s after every
  SecretSync was first seen Ready with its value.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from _common import (
    AUDIENCE,
    CLUSTER_IDENTITY,
    IDENTITY_ID,
    MANAGED_SELECTOR,
    OPERATOR_NAMESPACE,
    PROJECT_ID,
    PROJECT_SLUG,
    SYNCS_PATH,
    Api,
    Env,
    RunInfo,
    SyncTracker,
    add_control_plane_option,
    decode,
    environment,
    fmt_s,
    load,
    log,
    metric,
    safe_metrics,
    secret_sync_body,
    table,
)
from secretferry.devserver.testing import kubernetes_auth

NAMESPACE = "bench-outage"
KEY = "VALUE"
OUTAGE_FAULTS = {"routes": [{"match": "*", "status": 503}]}


def scope_path(j: int) -> str:
    return f"/outage/s{j:02d}"


def identity_id(k: int) -> str:
    """Identity 0 is the one ``_common`` seeds; the others are added here."""
    return IDENTITY_ID if k == 0 else f"0f000000-0000-4000-8000-0000000001{k:02d}"


def identity_name(k: int) -> str:
    return CLUSTER_IDENTITY if k == 0 else f"{CLUSTER_IDENTITY}-{k}"


class Values:
    """The value of KEY in each managed Secret, as our watch last saw it."""

    def __init__(self) -> None:
        self.value: dict[str, str | None] = {}
        self.synced = asyncio.Event()

    def handle(self, typ: str, obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        self.value[name] = None if typ == "DELETED" else decode(obj, KEY)


def add_identities(env: Env, count: int) -> None:
    """Service identities 1..count-1 (same TokenReview setup as identity 0) and their CMIDs."""
    token = env.cp.reviewer_token(expiration_seconds=24 * 3600)
    identities = [
        {
            "id": identity_id(k),
            "name": f"operator-{k}",
            "organization": "bench-org",
            "kubernetesAuth": kubernetes_auth(
                host=env.cp.server,
                ca_pem=env.cp.ca_pem,
                reviewer_token=token,
                audience=AUDIENCE,
                accessTokenTTL=3600,
                accessTokenMaxTTL=86400,
            ),
            "projects": [{"project": PROJECT_SLUG, "role": "admin"}],
        }
        for k in range(1, count)
    ]
    if identities:
        env.service.add_seed({"identities": identities})
    for k in range(1, count):
        sa = f"bench-sa-{k}"
        env.cp.kubectl("create", "serviceaccount", sa, "-n", OPERATOR_NAMESPACE)
        env.cp.apply(
            {
                "apiVersion": "secretferry.io/v1alpha1",
                "kind": "ClusterMachineIdentity",
                "metadata": {"name": identity_name(k)},
                "spec": {
                    "auth": {
                        "kubernetes": {
                            "identityId": identity_id(k),
                            "audiences": [AUDIENCE],
                            "serviceAccountRef": {"name": sa, "namespace": OPERATOR_NAMESPACE},
                        }
                    }
                },
            }
        )


async def set_values(env: Env, scopes: int, value: str) -> None:
    def write() -> None:
        for j in range(scopes):
            env.service.set_secret(PROJECT_ID, "dev", scope_path(j), KEY, value)

    await asyncio.to_thread(write)


async def measure(env: Env, args: argparse.Namespace) -> dict[str, Any]:
    add_identities(env, args.identities)
    api = Api(env.cp)
    tasks: list[asyncio.Task[None]] = []
    try:
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        names: list[str] = []
        bodies = []
        for i in range(args.syncs):
            j = i % args.scopes
            name = f"s{j:02d}-{i // args.scopes:03d}"
            names.append(name)
            polled = j % 2 == 1
            body = secret_sync_body(
                NAMESPACE,
                name,
                path=scope_path(j),
                refresh=args.refresh if polled else "5m",
                instant=not polled,
            )
            body["spec"]["identityRef"]["name"] = identity_name(j % args.identities)
            bodies.append(body)
        await api.gather_limited([lambda b=b: api.create(b) for b in bodies])
        tracker, values = SyncTracker(), Values()
        tasks.append(asyncio.create_task(api.watch(SYNCS_PATH, tracker.handle, tracker.synced)))
        tasks.append(
            asyncio.create_task(
                api.watch(
                    f"/api/v1/namespaces/{NAMESPACE}/secrets",
                    values.handle,
                    values.synced,
                    label_selector=MANAGED_SELECTOR,
                )
            )
        )
        op = env.start_operator("operator")
        log(f"{args.syncs} SecretSyncs, {args.scopes} scopes, {args.identities} identities; waiting")

        def settled(value: str) -> bool:
            return len(tracker.ready) == args.syncs and all(values.value.get(n) == value for n in names)

        if not await tracker.wait_until(lambda: settled("v0"), 180):
            raise RuntimeError(f"only {len(tracker.ready)} of {args.syncs} SecretSyncs became Ready")
        await asyncio.sleep(3)  # streams connected, start-up logins done
        before = env.service.stats()
        m0 = safe_metrics(op)

        log(f"outage ({args.mode}) for {args.outage:.0f} s")
        env.service.reset_stats()
        if args.mode == "faults":
            env.service.set_faults(OUTAGE_FAULTS)
            env.service.drop_streams()
            await asyncio.sleep(args.outage / 2)
            await set_values(env, args.scopes, "v1")  # the admin API is never faulted
            if args.expire_tokens:
                for k in range(args.identities):
                    env.service.expire_tokens(identity_id(k))
            await asyncio.sleep(args.outage / 2)
            during = env.service.stats()
            not_ready = args.syncs - len(tracker.ready)
            env.service.reset_stats()
            env.service.clear_faults()
            expected = "v1"
        else:
            env.service.stop()
            await asyncio.sleep(args.outage)
            not_ready = args.syncs - len(tracker.ready)
            await asyncio.to_thread(env.service.start_with_retries, allow_new_port=False)
            during = {"logins": 0, "listSecrets": 0}  # the process was gone: nothing was counted
            expected = "v0"
        back = time.monotonic()
        log(f"service back; {not_ready} SecretSyncs were not Ready at the end of the outage")

        async def window_end() -> tuple[dict[str, Any], str]:
            await asyncio.sleep(max(0.0, back + args.window - time.monotonic()))
            return env.service.stats(), safe_metrics(op)

        window = asyncio.create_task(window_end())
        limit = max(args.window, args.converge_limit)
        converged = await tracker.wait_until(lambda: settled(expected), limit, poll=0.05)
        converge_s = time.monotonic() - back if converged else None
        log(f"converged after {fmt_s(converge_s)}")
        after, m1 = await window
        live = after.get("liveTokens") or {}
        return {
            "logins_during": during["logins"],
            "lists_during": during["listSecrets"],
            "not_ready": not_ready,
            "converge_s": converge_s,
            "logins_after": after["logins"],
            "lists_after": after["listSecrets"],
            "subscribes_after": after["streamsOpened"],
            "live_tokens": [live.get(identity_id(k), 0) for k in range(args.identities)],
            "logins_before": before["logins"],
            "logins_metric": metric(m1, "secretferry_logins_total") - metric(m0, "secretferry_logins_total"),
            "revokes": after["routes"].get("POST /api/v1/auth/token/revoke", 0),
            "load": load(),
        }
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()


def report(r: dict[str, Any], args: argparse.Namespace, run: RunInfo) -> None:
    print()
    print(run.header())
    print(
        f"{args.syncs} SecretSyncs, {args.scopes} scopes (half polled every {args.refresh}), "
        f"{args.identities} identities; {args.outage:.0f} s outage ({args.mode}"
        f"{', tokens expired' if args.expire_tokens else ''}); window {args.window:.0f} s after it\n"
    )
    rows = [
        ("SecretSyncs not Ready at the end of the outage", r["not_ready"]),
        ("logins / list calls answered during the outage", f"{r['logins_during']} / {r['lists_during']}"),
        ("time to converge after the service is back", fmt_s(r["converge_s"])),
        (f"logins in the {args.window:.0f} s after", r["logins_after"]),
        (f"list calls in the {args.window:.0f} s after", r["lists_after"]),
        (f"streams opened in the {args.window:.0f} s after", r["subscribes_after"]),
        ("token revocations in that window", r["revokes"]),
        ("secretferry_logins_total, outage + window", f"{r['logins_metric']:.0f}"),
        ("live access tokens per identity at the end", ", ".join(map(str, r["live_tokens"]))),
        ("logins before the outage (start-up)", r["logins_before"]),
        ("load average at the end", r["load"]),
    ]
    print(table(["figure", "value"], rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--outage", type=float, default=60.0, help="outage length, seconds")
    p.add_argument("--window", type=float, default=60.0, help="measurement window after the outage, s")
    p.add_argument("--mode", choices=("faults", "stop"), default="faults")
    p.add_argument("--identities", type=int, default=3)
    p.add_argument("--scopes", type=int, default=12)
    p.add_argument("--syncs", type=int, default=120)
    p.add_argument("--refresh", default="15s", help="refreshInterval of the polled SecretSyncs")
    p.add_argument("--expire-tokens", action="store_true", help="expire every access token mid-outage")
    p.add_argument("--converge-limit", type=float, default=300.0, help="give up waiting after this, s")
    p.add_argument("--quick", action="store_true", help="20 s outage, 30 s window")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) for inspection")
    add_control_plane_option(p)
    args = p.parse_args()
    run = RunInfo(args.control_plane)
    if args.quick:
        args.outage, args.window = 20.0, 30.0
    if not 1 <= args.identities <= args.scopes <= args.syncs:
        p.error("need 1 <= identities <= scopes <= syncs")
    secrets = [
        {"environment": "dev", "path": scope_path(j), "key": KEY, "value": "v0"} for j in range(args.scopes)
    ]
    with environment(secrets=secrets, run=run, keep=args.keep) as env:
        result = asyncio.run(measure(env, args))
    report(result, args, run)


if __name__ == "__main__":
    main()
