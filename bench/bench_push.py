"""PushSecret: push → pull round trip through the service and its event stream, and the cost of
1,000 PushSecrets per change and at rest.

Everything real: the control plane, the dev server (a subprocess), the operator (``secretferry
run``). Two parts:

1. **Round trip.** Namespace ``push-a`` has a Secret and a PushSecret writing it to ``/rt``;
   namespace ``pull-b`` has a SecretSync pulling ``/rt`` (refreshInterval 1h: only the event
   stream can bring a change). ``--changes`` times (50): change the Secret, wait until the pulled
   Secret shows the value (its watch, here), one change at a time. p50/p99 of that delay.
2. **Scale.** ``--pushes`` PushSecrets (200; the README's figures: 1,000), each pushing its own
   Secret's one key into the folder ``/scale``, spread over 10 namespaces. Once all are Ready:
   ``--scale-changes`` (20) Secrets changed; writes at the service per change (the dev server's
   route counters: POST/PATCH /api/v4/secrets/{secretName}). Then ``--rest`` seconds (10; the
   README's: 30) with nothing changed: every call to the service's API in that window (expected
   0: no periodic re-push without refreshInterval).

Clocks: ``time.monotonic()`` in this process. Round trip: from just before the PATCH of the
pushed Secret is sent to the apiserver until the benchmark's watch of ``pull-b`` delivers the
pulled Secret with the new value. Scale: from the first create until the dev server has counted
one write per PushSecret.

Run: ``.venv/bin/python bench/bench_push.py [--changes 50 --pushes 1000 --rest 30]`` (the
README's sizes, about two minutes on 2 cores; ``make bench`` runs the smaller defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time
from typing import Any

from _common import (
    CLUSTER_IDENTITY,
    PROJECT_ID,
    Api,
    Env,
    RunInfo,
    add_control_plane_option,
    environment,
    fmt_ms,
    log,
    percentile,
    secret_sync_body,
)

NAMESPACES = 10
WRITES = ("POST /api/v4/secrets/{secretName}", "PATCH /api/v4/secrets/{secretName}")


def secret_body(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                "secretferry.io/allow-push": name,
                "secretferry.io/allow-push-to": f"{PROJECT_ID}/dev/",
            },
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def push_body(namespace: str, name: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "PushSecret",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"kind": "ClusterMachineIdentity", "name": CLUSTER_IDENTITY},
            "selector": {"secret": {"name": name}},
            "destination": {"projectId": PROJECT_ID, "environment": "dev", "path": path},
        },
    }


async def create(api: Api, body: dict[str, Any]) -> None:
    meta = body["metadata"]
    if body["kind"] == "Secret":
        path = f"/api/v1/namespaces/{meta['namespace']}/secrets"
    elif body["kind"] == "PushSecret":
        path = f"/apis/secretferry.io/v1alpha1/namespaces/{meta['namespace']}/pushsecrets"
    else:
        await api.create(body)
        return
    await api.request("POST", path, body)


async def set_value(api: Api, namespace: str, name: str, key: str, value: str) -> None:
    await api.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/secrets/{name}",
        {"stringData": {key: value}},
        content_type="application/merge-patch+json",
    )


def writes(env: Env) -> int:
    routes: dict[str, int] = env.service.stats()["routes"]
    return sum(routes.get(r, 0) for r in WRITES)


def api_calls(env: Env) -> dict[str, int]:
    routes: dict[str, int] = env.service.stats()["routes"]
    return {r: n for r, n in routes.items() if " /api/" in r and n}


async def round_trip(env: Env, api: Api, changes: int) -> list[float]:
    for ns in ("push-a", "pull-b"):
        await create(api, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}})
    await create(api, secret_body("push-a", "rt", {"RT": "rt-value-0"}))
    await create(api, push_body("push-a", "rt", "/rt"))
    await api.create(secret_sync_body("pull-b", "rt", path="/rt", refresh="1h"))
    arrived: dict[str, float] = {}
    streaming = asyncio.Event()

    def on_target(_typ: str, obj: dict[str, Any]) -> None:
        raw = (obj.get("data") or {}).get("RT")
        if raw is not None:
            arrived.setdefault(base64.b64decode(raw).decode(), time.monotonic())

    def on_sync(_typ: str, obj: dict[str, Any]) -> None:
        if (obj.get("status") or {}).get("updateMode") == "Streaming":
            streaming.set()

    synced = asyncio.Event()
    watches = [
        asyncio.create_task(api.watch("/api/v1/namespaces/pull-b/secrets", on_target, synced)),
        asyncio.create_task(
            api.watch("/apis/secretferry.io/v1alpha1/namespaces/pull-b/secretsyncs", on_sync, asyncio.Event())
        ),
    ]
    try:
        await asyncio.wait_for(streaming.wait(), 60)
        deadline = time.monotonic() + 60
        while "rt-value-0" not in arrived and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        delays: list[float] = []
        for i in range(1, changes + 1):
            value = f"rt-value-{i}"
            started = time.monotonic()
            await set_value(api, "push-a", "rt", "RT", value)
            while value not in arrived and time.monotonic() - started < 30:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            delays.append(arrived.get(value, float("inf")) - started)
            await asyncio.sleep(0.2)  # one change at a time, not a burst
        return delays
    finally:
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)


async def scale(env: Env, api: Api, pushes: int, scale_changes: int, rest: float) -> dict[str, Any]:
    namespaces = [f"push-{i}" for i in range(NAMESPACES)]
    for ns in namespaces:
        await create(api, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}})
    names = [(namespaces[i % NAMESPACES], f"p{i:05d}") for i in range(pushes)]
    env.service.reset_stats()
    started = time.monotonic()
    await api.gather_limited(
        [lambda ns=ns, n=n: create(api, secret_body(ns, n, {n.upper(): f"{n}-v0"})) for ns, n in names]
    )
    await api.gather_limited([lambda ns=ns, n=n: create(api, push_body(ns, n, "/scale")) for ns, n in names])
    log(f"{pushes} Secrets and PushSecrets created in {time.monotonic() - started:.1f} s")
    deadline = time.monotonic() + 600
    while writes(env) < pushes and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the dev server
        await asyncio.sleep(0.5)
    first_push_s = time.monotonic() - started
    log(f"{writes(env)} first pushes written {first_push_s:.1f} s after the first create")
    await asyncio.sleep(3)  # status patches and their echoes settle
    env.service.reset_stats()
    for ns, n in names[:scale_changes]:
        await set_value(api, ns, n, n.upper(), f"{n}-v1")
    deadline = time.monotonic() + 60
    while writes(env) < scale_changes and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    await asyncio.sleep(3)  # anything more would show now
    per_change = api_calls(env)
    env.service.reset_stats()
    log(f"at rest for {rest:.0f} s")
    await asyncio.sleep(rest)
    return {"first_push_s": first_push_s, "per_change": per_change, "at_rest": api_calls(env)}


async def amain(args: argparse.Namespace) -> int:
    run = RunInfo(args.control_plane)
    secrets = [
        {"environment": "dev", "path": "/rt", "key": "FOLDER", "value": "x"},
        {"environment": "dev", "path": "/scale", "key": "FOLDER", "value": "x"},
    ]
    with environment(secrets=secrets, run=run, devserver_args=["--heartbeat-seconds", "5"]) as env:
        env.cp.kubectl(
            "patch",
            "clustermachineidentity",
            CLUSTER_IDENTITY,
            "--type=merge",
            "-p",
            json.dumps(
                {
                    "spec": {
                        "pushAllowed": [{"projectId": PROJECT_ID, "environment": "dev", "pathPrefix": "/"}]
                    }
                }
            ),
        )
        op = env.start_operator("operator")
        api = Api(env.cp)
        try:
            delays = await round_trip(env, api, args.changes)
            figures = await scale(env, api, args.pushes, args.scale_changes, args.rest)
        finally:
            await api.close()
        metrics = [line for line in op.metrics().splitlines() if line.startswith("secretferry_push")]
    print(run.header())
    print(f"push → service → event stream → pull, {len(delays)} changes one at a time:")
    p50, p99 = percentile(delays, 50), percentile(delays, 99)
    print(f"  p50 {fmt_ms(p50)}, p99 {fmt_ms(p99)}, max {fmt_ms(max(delays))}")
    changed = args.scale_changes
    per_change = figures["per_change"]
    n_writes = sum(per_change.get(r, 0) for r in WRITES)
    first = figures["first_push_s"]
    print(f"{args.pushes} PushSecrets: first push of all within {first:.1f} s of the first create")
    print(f"  {changed} Secrets changed: {n_writes} writes ({n_writes / changed:.2f} per change)")
    print(f"  every API call meanwhile: {per_change}")
    at_rest = figures["at_rest"]
    print(f"  at rest for {args.rest:.0f} s: {sum(at_rest.values())} API calls {at_rest or ''}")
    print("\n".join(metrics))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=50, help="round-trip changes (50)")
    parser.add_argument("--pushes", type=int, default=200, help="PushSecrets in the scale part (200)")
    parser.add_argument(
        "--scale-changes", type=int, default=20, help="Secrets changed in the scale part (20)"
    )
    parser.add_argument("--rest", type=float, default=10.0, help="seconds at rest (10)")
    add_control_plane_option(parser)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(amain(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
