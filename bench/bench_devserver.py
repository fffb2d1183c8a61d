"""Dev-server benchmarks over loopback HTTP (the dev server runs as a subprocess).

1. Recursive list of 1,000 secrets across 50 folders: p50/p95 latency (target < 50 ms).
2. Fan-out of one change to 200 open event streams: time until every stream has it.

Run: ``.venv/bin/python bench/bench_devserver.py``
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from secretferry.devserver.testing import DevServer, run_dev_server

PROJECT = "bbbbbbbb-0000-4000-8000-000000000001"
FOLDERS = 50
SECRETS = 1000
LIST_RUNS = 200
STREAMS = 200
TOKEN = {"Authorization": "Bearer bench-token"}


def seed() -> dict[str, object]:
    secrets = [
        {
            "environment": "dev",
            "path": f"/svc{i % FOLDERS:02d}/cfg",
            "key": f"KEY_{i:04d}",
            "value": f"value-{i}",
        }
        for i in range(SECRETS)
    ]
    return {
        "projects": [
            {
                "id": PROJECT,
                "slug": "bench",
                "environments": [{"slug": "dev", "name": "Dev"}],
                "secrets": secrets,
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


def bench_list(server: DevServer) -> None:
    params = {"projectId": PROJECT, "environment": "dev", "recursive": "true"}
    timings = []
    with httpx.Client(base_url=server.base_url, headers=TOKEN) as client:
        first = client.get("/api/v4/secrets", params=params)
        assert len(first.json()["secrets"]) == SECRETS, len(first.json()["secrets"])
        for _ in range(LIST_RUNS):
            started = time.perf_counter()
            client.get("/api/v4/secrets", params=params).raise_for_status()
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    p50 = statistics.median(timings)
    p95 = timings[int(len(timings) * 0.95) - 1]
    print(
        f"recursive list, {SECRETS} secrets in {FOLDERS} folders, {LIST_RUNS} runs: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )


async def bench_fan_out(server: DevServer) -> None:
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
        for _ in range(STREAMS):
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
            f"fan-out of one change to {STREAMS} streams: all received after {last_ms:.1f} ms "
            f"(first after {first_ms:.1f} ms, incl. the admin write round trip)"
        )
        for response in responses:
            await response.aclose()


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        run_dev_server(
            seed=seed(),
            data_dir=Path(tmp),
            extra_args=["--stream-cap", str(STREAMS + 10), "--event-generation", "newest"],
        ) as server,
    ):
        bench_list(server)
        asyncio.run(bench_fan_out(server))


if __name__ == "__main__":
    main()
