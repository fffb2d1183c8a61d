"""Dev-server benchmarks over loopback HTTP (the dev server runs as a subprocess; no control plane).

1. Recursive list of ``--secrets`` secrets (1,000) across ``--folders`` folders (50): p50/p95
   latency over ``--list-runs`` (200) calls (target < 50 ms).
2. Fan-out of one change to ``--streams`` (200) open event streams: time until every stream has it.

Run: ``.venv/bin/python bench/bench_devserver.py [--secrets 1000 --folders 50 --list-runs 200
--streams 200]``. The report starts with the machine, its load and the commit.

Clocks (``time.perf_counter()`` in this process):

- recursive list p50 / p95: from just before ``GET /api/v4/secrets?recursive=true`` is sent (one
  keep-alive connection, after one untimed warm-up call) to the end of reading its whole body; the
  JSON is not parsed inside the clock.
- fan-out "all received" / "first": from just before the admin write of the change (the dev server's
  ``PUT /_admin/secrets``, run in a thread, so its round trip is included) to the arrival of the
  first ``data:`` line on the last / the first of the open streams (all subscribed and idle for
  0.2 s before the write).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from _common import RunInfo
from secretferry.devserver.testing import DevServer, run_dev_server

PROJECT = "bbbbbbbb-0000-4000-8000-000000000001"
TOKEN = {"Authorization": "Bearer bench-token"}
# The README's figures: a project the size of a busy team's (1,000 secrets in 50 folders), enough
# list calls for a stable p95, and 200 streams (the operator needs a handful; this is the server's
# side of many operators at once).
FOLDERS = 50
SECRETS = 1000
LIST_RUNS = 200
STREAMS = 200
# Streams the server admits beyond the ones opened, so the cap never refuses one of ours.
STREAM_CAP_HEADROOM = 10


def seed(secrets: int, folders: int) -> dict[str, object]:
    rows = [
        {
            "environment": "dev",
            "path": f"/svc{i % folders:02d}/cfg",
            "key": f"KEY_{i:04d}",
            "value": f"value-{i}",
        }
        for i in range(secrets)
    ]
    return {
        "projects": [
            {
                "id": PROJECT,
                "slug": "bench",
                "environments": [{"slug": "dev", "name": "Dev"}],
                "secrets": rows,
            }
        ],
        "identities": [
            {
                "id": "bench-id",
                "name": "bench",
                "accessTokens": [{"token": "bench-token"}],
                "projects": [{"project": "bench", "role": "admin"}],
            }
        ],
    }


def bench_list(server: DevServer, args: argparse.Namespace) -> None:
    params = {"projectId": PROJECT, "environment": "dev", "recursive": "true"}
    timings = []
    with httpx.Client(base_url=server.base_url, headers=TOKEN) as client:
        first = client.get("/api/v4/secrets", params=params)
        assert len(first.json()["secrets"]) == args.secrets, len(first.json()["secrets"])
        for _ in range(args.list_runs):
            started = time.perf_counter()
            client.get("/api/v4/secrets", params=params).raise_for_status()
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    p50 = statistics.median(timings)
    p95 = timings[max(0, int(len(timings) * 0.95) - 1)]
    print(
        f"recursive list, {args.secrets} secrets in {args.folders} folders, {args.list_runs} runs: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )


async def bench_fan_out(server: DevServer, args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    body = {
        "projectId": PROJECT,
        "register": [
            # A prefix on the newest generation: "/" selects every folder.
            {"event": "secret:update", "conditions": {"environmentSlug": "dev", "secretPath": "/"}}
        ],
    }
    async with httpx.AsyncClient(
        base_url=server.base_url, headers=TOKEN, limits=limits, timeout=30
    ) as client:
        responses = []
        for _ in range(args.streams):
            request = client.build_request("POST", "/api/v1/events/subscribe/project-events", json=body)
            response = await client.send(request, stream=True)
            assert response.status_code == 200
            responses.append(response)

        async def first_event(response: httpx.Response) -> float:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    return time.perf_counter()
            raise RuntimeError("stream closed")

        waiters = [asyncio.create_task(first_event(r)) for r in responses]
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        await asyncio.to_thread(server.set_secret, PROJECT, "dev", "/svc00/cfg", "KEY_0000", "changed")
        done = await asyncio.gather(*waiters)
        last_ms, first_ms = (max(done) - started) * 1000, (min(done) - started) * 1000
        print(
            f"fan-out of one change to {args.streams} streams: all received after {last_ms:.1f} ms "
            f"(first after {first_ms:.1f} ms, incl. the admin write round trip)"
        )
        for response in responses:
            await response.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--secrets", type=int, default=SECRETS, help="secrets in the project")
    p.add_argument("--folders", type=int, default=FOLDERS, help="folders they are spread over")
    p.add_argument("--list-runs", type=int, default=LIST_RUNS, help="timed recursive list calls")
    p.add_argument("--streams", type=int, default=STREAMS, help="open event streams for the fan-out")
    args = p.parse_args()
    if not 1 <= args.folders <= args.secrets or args.list_runs < 1 or args.streams < 1:
        p.error("need 1 <= folders <= secrets, list-runs >= 1 and streams >= 1")
    run = RunInfo(None)
    with (
        tempfile.TemporaryDirectory() as tmp,
        run_dev_server(
            seed=seed(args.secrets, args.folders),
            data_dir=Path(tmp),
            extra_args=[
                "--stream-cap",
                str(args.streams + STREAM_CAP_HEADROOM),
                "--event-generation",
                "newest",
            ],
        ) as server,
    ):
        print(run.header())
        bench_list(server, args)
        asyncio.run(bench_fan_out(server, args))


if __name__ == "__main__":
    main()
