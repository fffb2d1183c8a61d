"""secretferry.reconcile.rendering.pool: templates in worker processes under CPU, memory, output and
wall-clock limits; real child processes, the wall clock replaced by deadlines the test fires."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from secretferry import models
from secretferry.reconcile import desired, problems, reasons
from secretferry.reconcile.rendering import pool as renderpool
from secretferry.reconcile.rendering import quarantine, templating
from secretferry.reconcile.rendering import worker as renderworker

pytestmark = pytest.mark.asyncio(loop_scope="module")

CPU_SECONDS = 0.3
LIMITS = renderpool.Limits(
    cpu_seconds=CPU_SECONDS, timeout_seconds=30.0, memory_bytes=64 * 1024 * 1024, max_output_bytes=1024 * 1024
)
SECRET_VALUE = "s3cr3t-V@LUE-never-shown"
SECRETS = {
    "DB_USER": "bob",
    "DB_PASS": "hunter2-value",
    "db-host": "db.local",
    "range": "shadowed",
    "CFG": '{"a": 1}',
    "PASSWORD": SECRET_VALUE,
}
# Two nested loops of 10^4: 10^8 iterations, far beyond any CPU limit, with no output at all.
CPU_BOMB = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"


class Deadlines:
    """Stands in for ``asyncio.timeout``: a deadline passes when the test says so (no waiting)."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, asyncio.Timeout]] = []

    def __call__(self, seconds: float) -> asyncio.Timeout:
        timeout = asyncio.timeout(None)
        self.armed.append((seconds, timeout))
        return timeout

    def expire(self, seconds: float) -> None:
        """The latest deadline of that length passes now."""
        latest = [timeout for length, timeout in self.armed if length == seconds][-1]
        latest.reschedule(asyncio.get_running_loop().time())


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool() -> AsyncIterator[renderpool.RenderPool]:
    shared = renderpool.RenderPool(LIMITS, workers=2)
    yield shared
    await shared.close()


@pytest_asyncio.fixture(loop_scope="module")
async def fresh() -> AsyncIterator[renderpool.RenderPool]:
    own = renderpool.RenderPool(LIMITS, workers=1)
    yield own
    await own.close()


async def until_busy(pool: renderpool.RenderPool) -> int:
    """The busy worker's pid, once a render has been handed to it (yields only: no sleeping)."""
    for _ in range(10_000):
        busy = pool.pids(busy_only=True)
        if busy:
            return busy[0]
        await asyncio.sleep(0)
    raise AssertionError("no render started")


# --- the same text as in-process rendering -----------------------------------------------------
SAME_AS_IN_PROCESS = [
    "{{ DB_USER }}:{{ DB_PASS }}",
    '{{ secrets["db-host"] }}',
    '{{ secrets.get("NOPE", "fallback") }}',
    "{{ DB_USER | b64enc }}",
    "{{ 'Ym9i' | b64dec }}",
    '{{ {"user": DB_USER, "tag": "<&>"} | tojson }}',
    "{{ (CFG | fromjson).a }}",
    "{{ range(2) | list }}",
    "line\n",
    "{% for k in secrets | sort %}{{ k }},{% endfor %}",
    "{{ 'ab' * 2 }}{{ 2 ** 10 }}",
    "ünïcødé ✓ {{ DB_USER | upper }}",
    "",
]
ERRORS_AS_IN_PROCESS = [
    "{{ NOPE }}",
    "{{ secrets[DB_PASS] }}",
    "{% if %}",
    "{{ DB_PASS | b64dec }}",
    "{{ DB_PASS + 1 }}",
    "{{ 'x' * 100000000 }}",
    "{{ ''.__class__ }}",
    "{{ range(20000) | list }}",
    '{{ "\\ud800" }}',
]


@pytest.mark.parametrize("source", SAME_AS_IN_PROCESS)
async def test_a_template_renders_as_it_does_in_process(pool: renderpool.RenderPool, source: str) -> None:
    templates = {"out": source, "second": "{{ DB_USER }}"}
    expected = templating.render(templates, SECRETS)
    assert await pool.render(templates, SECRETS, tenant="team-a") == expected


@pytest.mark.parametrize("source", ERRORS_AS_IN_PROCESS)
async def test_a_failure_reads_as_it_does_in_process(pool: renderpool.RenderPool, source: str) -> None:
    templates = {"ok": "{{ DB_USER }}", "bad": source}
    with pytest.raises(templating.TemplateRenderError) as in_process:
        templating.render(templates, SECRETS)
    pids = pool.pids()
    with pytest.raises(templating.TemplateRenderError) as pooled:
        await pool.render(templates, SECRETS, tenant="team-a")
    assert (pooled.value.key, str(pooled.value)) == ("bad", str(in_process.value))
    assert pool.pids() == pids, "an ordinary template error keeps the worker"


# --- the limits ---------------------------------------------------------------------------------
async def test_a_cpu_bomb_stops_at_the_cpu_limit() -> None:
    deadlines = Deadlines()  # armed for every render, passed by none: only the CPU limit can end it
    own = renderpool.RenderPool(LIMITS, workers=1, deadline=deadlines)
    try:
        with pytest.raises(templating.TemplateRenderError) as info:
            await own.render({"ok": "{{ DB_USER }}", "bomb": CPU_BOMB}, SECRETS, tenant="nasty")
        assert str(info.value) == f"template 'bomb': exceeded the CPU time limit of {CPU_SECONDS:g} s"
        assert info.value.limit == "cpu"
        assert LIMITS.timeout_seconds in [length for length, _ in deadlines.armed]
        pids = own.pids()
        assert len(pids) == 1, "the worker survives a CPU limit hit"
        assert await own.render({"k": "{{ DB_USER }}"}, SECRETS, tenant="team-a") == {"k": "bob"}
        assert own.pids() == pids
    finally:
        await own.close()


async def test_the_classic_nested_range_bomb_fails_at_once(fresh: renderpool.RenderPool) -> None:
    bomb = "{% for i in range(100000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}"
    with pytest.raises(templating.TemplateRenderError) as info:
        await fresh.render({"k": bomb}, SECRETS, tenant="nasty")
    assert "range limit" in str(info.value) and info.value.limit == "range"


@pytest.mark.parametrize(
    "bomb",
    [
        "{{ 'x' | center(300000000) }}",
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000) | join }}",
        "{{ '%0200000000d' % 1 }}",
        "{% set ns = namespace(l=[]) %}{% for i in range(10000) %}"
        "{% set ns.l = ns.l + ['y' * 100000] %}{% endfor %}{{ ns.l | length }}",
    ],
)
async def test_a_memory_bomb_stops_at_the_memory_limit(fresh: renderpool.RenderPool, bomb: str) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        await fresh.render({"mem": bomb}, SECRETS, tenant="nasty")
    assert str(info.value) == "template 'mem': exceeded the memory limit of 64 MiB"
    assert info.value.limit == "memory"
    # The worker goes on if its heap shrank back, else a new one is started: either way the
    # next template renders, with the whole budget.
    assert await fresh.render({"k": "{{ DB_USER }}"}, SECRETS, tenant="team-a") == {"k": "bob"}
    assert _vm_size(fresh.pids()[0]) <= 100 * 1024 * 1024


# A stand-in worker: ready, reads a request, reports its second key, exits with ``code``.
FAKE_WORKER = """
import os, sys
from secretferry.reconcile.rendering import worker as w
out = sys.stdout.buffer
out.write(w.FRAME.pack(w.READY, 0)); out.flush()
(n,) = w.REQUEST.unpack(sys.stdin.buffer.read(w.REQUEST.size)); sys.stdin.buffer.read(n)
out.write(w.FRAME.pack(w.KEY, 6) + b"second"); out.flush()
os._exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize(
    ("code", "message", "limit"),
    [
        (renderworker.EXIT_MEMORY, "exceeded the memory limit of 64 MiB", "memory"),
        (renderworker.EXIT_CPU, f"exceeded the CPU time limit of {CPU_SECONDS:g} s", "cpu"),
        (1, "the template worker stopped unexpectedly (exit code 1)", None),
    ],
)
async def test_a_worker_that_exits_is_reported_by_its_exit_code(
    code: int, message: str, limit: str | None
) -> None:
    fake = renderpool.RenderPool(LIMITS, workers=1, command=[sys.executable, "-c", FAKE_WORKER, str(code)])
    try:
        with pytest.raises(templating.TemplateRenderError) as info:
            await fake.render({"first": "1", "second": "2"}, {}, tenant="team-a")
        assert str(info.value) == f"template 'second': {message}"
        assert info.value.limit == limit
    finally:
        await fake.close()


@pytest.mark.parametrize(
    "templates",
    [
        {"big": "{% for i in range(2000) %}{{ 'y' * 1000 }}{% endfor %}"},  # stopped while streaming
        {"a": "{{ 'y' * 600000 }}", "b": "{{ 'z' * 600000 }}"},  # together over the limit
        {"a": "{{ '€' * 400000 }}"},  # 400,000 characters, 1,200,000 bytes
    ],
)
async def test_output_over_1_mib_is_refused(pool: renderpool.RenderPool, templates: dict[str, str]) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        await pool.render(templates, SECRETS, tenant="team-a")
    assert str(info.value).endswith("output exceeds the size limit of 1048576 bytes")
    assert info.value.limit == "output"


async def test_output_up_to_the_limit_is_fine(pool: renderpool.RenderPool) -> None:
    rendered = await pool.render({"a": "{{ 'y' * 1048576 }}"}, SECRETS, tenant="team-a")
    assert len(rendered["a"]) == 1024 * 1024


async def test_a_bomb_is_quarantined_whatever_its_inputs() -> None:
    now = [1000.0]
    own = renderpool.RenderPool(LIMITS, workers=1, clock=lambda: now[0])
    try:
        bomb = {"bomb": CPU_BOMB}
        with pytest.raises(templating.TemplateRenderError, match="CPU time limit"):
            await own.render(bomb, SECRETS, tenant="nasty")
        assert own.requests == 1
        with pytest.raises(templating.TemplateRenderError, match="CPU time limit"):
            await own.render(bomb, {**SECRETS, "DB_PASS": "changed"}, tenant="nasty")
        assert own.requests == 1, "answered without a worker: new values do not lift it"
        with pytest.raises(templating.TemplateRenderError, match="CPU time limit"):
            await own.render(bomb, SECRETS, tenant="other")
        assert own.requests == 2, "another namespace's template is its own"
        now[0] += quarantine.INITIAL_SECONDS
        with pytest.raises(templating.TemplateRenderError, match="CPU time limit"):
            await own.render(bomb, SECRETS, tenant="nasty")
        assert own.requests == 3, "rendered again after the backoff"
        now[0] += quarantine.INITIAL_SECONDS
        with pytest.raises(templating.TemplateRenderError, match="CPU time limit"):
            await own.render(bomb, SECRETS, tenant="nasty")
        assert own.requests == 3, "the second wait is twice as long"
        assert await own.render({"bomb": "{{ DB_USER }}"}, SECRETS, tenant="nasty") == {"bomb": "bob"}
        assert own.requests == 4, "an edited template renders at once"
        for _ in range(2):
            with pytest.raises(templating.TemplateRenderError, match="range limit"):
                await own.render({"k": "{{ range(20000) | length }}"}, SECRETS, tenant="nasty")
        assert own.requests == 6, "cheap failures are not quarantined"
    finally:
        await own.close()


# --- the wall clock and dead workers ------------------------------------------------------------
async def test_past_the_deadline_the_worker_is_killed_and_replaced() -> None:
    deadlines = Deadlines()
    limits = renderpool.Limits(
        cpu_seconds=600, timeout_seconds=5, memory_bytes=LIMITS.memory_bytes, max_output_bytes=1024
    )
    own = renderpool.RenderPool(limits, workers=1, deadline=deadlines)
    try:
        await own.render({"warm": "1"}, {}, tenant="team-a")
        render = asyncio.create_task(own.render({"a": "1", "slow": CPU_BOMB}, {}, tenant="nasty"))
        pid = await until_busy(own)
        deadlines.expire(5)
        with pytest.raises(templating.TemplateRenderError) as info:
            await render
        assert str(info.value) == "template 'a': took longer than the time limit of 5 s (wall clock)"
        assert info.value.limit == "timeout"
        assert _gone(pid)
        assert await own.render({"k": "{{ X }}"}, {"X": "next"}, tenant="team-a") == {"k": "next"}
        assert own.pids() and own.pids()[0] != pid
    finally:
        await own.close()


async def test_a_worker_killed_mid_render_is_replaced() -> None:
    slow = renderpool.RenderPool(
        renderpool.Limits(
            cpu_seconds=600, timeout_seconds=900, memory_bytes=LIMITS.memory_bytes, max_output_bytes=1024
        ),
        workers=1,
    )
    try:
        await slow.render({"warm": "1"}, {}, tenant="team-a")
        render = asyncio.create_task(slow.render({"slow": CPU_BOMB}, {}, tenant="team-a"))
        pid = await until_busy(slow)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(templating.TemplateRenderError) as info:
            await render
        assert (
            str(info.value) == "template 'slow': the template worker stopped unexpectedly (killed by SIGKILL)"
        )
        assert await slow.render({"k": "{{ X }}"}, {"X": "again"}, tenant="team-a") == {"k": "again"}
        assert slow.pids() and slow.pids()[0] != pid
    finally:
        await slow.close()


async def test_a_cancelled_render_kills_its_worker() -> None:
    deadlines = Deadlines()
    limits = renderpool.Limits(
        cpu_seconds=600, timeout_seconds=5, memory_bytes=LIMITS.memory_bytes, max_output_bytes=1024
    )
    own = renderpool.RenderPool(limits, workers=1, deadline=deadlines)
    try:
        await own.render({"warm": "1"}, {}, tenant="team-a")
        render = asyncio.create_task(own.render({"slow": CPU_BOMB}, {}, tenant="team-a"))
        await until_busy(own)
        render.cancel()
        with pytest.raises(asyncio.CancelledError):
            await render
        assert own.pids() == []
        assert await own.render({"k": "1"}, {}, tenant="team-a") == {"k": "1"}
    finally:
        await own.close()


async def test_a_worker_that_cannot_start_is_a_template_error() -> None:
    broken = renderpool.RenderPool(
        LIMITS, workers=1, command=[sys.executable, "-c", "import sys; sys.exit(7)"]
    )
    with pytest.raises(templating.TemplateRenderError) as info:
        await broken.render({"k": "1"}, {}, tenant="team-a")
    assert "could not start" in str(info.value) and info.value.key == "k"
    await broken.close()


# --- fairness -----------------------------------------------------------------------------------
async def test_a_busy_namespace_does_not_go_first_twice(fresh: renderpool.RenderPool) -> None:
    await fresh.render({"warm": "1"}, {}, tenant="warm")
    done: list[str] = []

    async def one(tenant: str, n: int) -> None:
        await fresh.render({"k": "{{ X }}"}, {"X": str(n)}, tenant=tenant)
        done.append(f"{tenant}{n}")

    tasks = [asyncio.create_task(one("a", n)) for n in range(4)]
    await asyncio.sleep(0)  # a1..a3 queue behind a0
    tasks.append(asyncio.create_task(one("b", 0)))
    await asyncio.gather(*tasks)
    assert done == ["a0", "b0", "a1", "a2", "a3"]


# --- the worker process itself ------------------------------------------------------------------
async def test_the_worker_is_niced_and_bounded(pool: renderpool.RenderPool) -> None:
    await pool.render({"k": "1"}, {}, tenant="team-a")
    pid = pool.pids()[0]
    nice, limits, environ = _proc(pid)
    assert nice == renderworker.NICENESS
    assert _limit(limits, "Max address space") != "unlimited"
    assert _limit(limits, "Max core file size") == "0"
    assert _limit(limits, "Max file size") == "0"
    assert b"SECRETFERRY_" not in environ


@pytest.mark.parametrize(
    "source",
    [
        "{{ secrets[PASSWORD] }}",
        "{{ PASSWORD | int + PASSWORD }}",
        "{{ PASSWORD | fromjson }}",
        "{{ range(PASSWORD) }}",
        "{{ {}[PASSWORD] }}",
    ],
)
async def test_no_value_in_errors_or_on_stderr(
    pool: renderpool.RenderPool, source: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        await pool.render({"out": source}, SECRETS, tenant="team-a")
    assert SECRET_VALUE not in str(info.value) and SECRET_VALUE not in repr(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None
    out, err = capfd.readouterr()
    assert SECRET_VALUE not in out + err


# --- the call site -------------------------------------------------------------
def _sync(template: dict[str, Any]) -> models.SecretSync:
    return models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "team-a", "uid": "uid-1"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": [{"projectId": "p", "environment": "dev"}],
                "target": {"template": template},
            },
        }
    )


async def test_render_and_build_matches_build_desired(pool: renderpool.RenderPool) -> None:
    fetched = [desired.FetchedSource({"U": "u", "P": "p"})]
    for template in ({"data": {"U": "{{ U | upper }}"}, "includeAll": True}, {"data": {"x": "{{ P }}!"}}):
        sync = _sync(template)
        off_loop = await desired.render_and_build(sync, fetched, hmac_key=b"k" * 32, renderer=pool)
        assert off_loop == desired.build_desired(sync, fetched, hmac_key=b"k" * 32)


async def test_render_and_build_names_the_limit_and_the_key(fresh: renderpool.RenderPool) -> None:
    fetched = [desired.FetchedSource({"U": "u"})]
    with pytest.raises(problems.Problem) as info:
        await desired.render_and_build(
            _sync({"data": {"fine": "{{ U }}", "bomb.conf": CPU_BOMB}}),
            fetched,
            hmac_key=b"k" * 32,
            renderer=fresh,
        )
    assert info.value.reason == reasons.TEMPLATE_ERROR
    assert info.value.message == f"template 'bomb.conf': exceeded the CPU time limit of {CPU_SECONDS:g} s"


def _vm_size(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


def _gone(pid: int) -> bool:
    """Exited (and reaped, or a zombie about to be)."""
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _proc(pid: int) -> tuple[int, str, bytes]:
    """Niceness, the limits table and the environment of a process."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except PermissionError:  # not dumpable, and we are not root: not even readable
        environ = b""
    return int(stat[16]), Path(f"/proc/{pid}/limits").read_text(), environ


def _limit(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name):
            return line[len(name) :].split()[0]
    raise AssertionError(name)
