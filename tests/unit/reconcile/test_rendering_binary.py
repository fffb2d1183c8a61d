"""Binary values through the template worker (real child processes): bytes go in as ``binary`` in
the request and come back in BYTES frames, equal to in-process rendering, under the same output
limit; ``render_and_build`` carries them into the desired Secret."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from secretferry import models
from secretferry.reconcile import desired
from secretferry.reconcile.rendering import pool as renderpool
from secretferry.reconcile.rendering import templating
from secretferry.reconcile.rendering import worker as renderworker

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIMITS = renderpool.Limits(
    cpu_seconds=1.0, timeout_seconds=30.0, memory_bytes=64 * 1024 * 1024, max_output_bytes=4096
)
RAW = bytes(range(256)) * 4  # 1 KiB, not UTF-8
SECRETS: dict[str, str | bytes] = {"KS": RAW, "KS_B64": base64.b64encode(RAW).decode(), "USER": "bob"}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool() -> AsyncIterator[renderpool.RenderPool]:
    shared = renderpool.RenderPool(LIMITS, workers=1)
    yield shared
    await shared.close()


async def test_the_request_carries_bytes_apart() -> None:
    body = renderworker.encode_request({"a": "{{ KS }}"}, SECRETS)
    assert renderworker.decode_request(body) == ({"a": "{{ KS }}"}, SECRETS)
    assert b"\\u00ff" not in body  # bytes are base64 in "binary", never smuggled as text


@pytest.mark.parametrize(
    "templates",
    [
        {"a": "{{ KS }}", "b": "{{ USER }}", "c": "{{ KS_B64 | b64dec_bytes }}", "d": "{{ KS | b64enc }}"},
        {"a": "{{ 'aGk=' | b64dec_bytes }}"},  # UTF-8 bytes come back as text
    ],
)
async def test_binary_renders_as_in_process(pool: renderpool.RenderPool, templates: dict[str, str]) -> None:
    expected = templating.render(templates, SECRETS, max_output_bytes=LIMITS.max_output_bytes)
    got = await pool.render(templates, SECRETS, tenant="team-a")
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}


async def test_binary_output_is_bounded_in_the_worker(pool: renderpool.RenderPool) -> None:
    with pytest.raises(templating.TemplateRenderError) as info:
        await pool.render({k: "{{ KS }}" for k in "abcde"}, SECRETS, tenant="team-a")
    assert info.value.limit == "output" and info.value.key == "e"


async def test_render_and_build_writes_the_bytes(pool: renderpool.RenderPool) -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "app", "namespace": "team-a", "uid": "u"},
        "spec": {
            "identityRef": {"name": "mi"},
            "sources": [
                {
                    "projectId": "p",
                    "environment": "dev",
                    "decoding": [{"keys": "*.p12", "strategy": "Base64"}],
                }
            ],
            "target": {"template": {"data": {"app.p12": "{{ secrets['ks.p12'] }}", "user": "{{ USER }}"}}},
        },
    }
    sync = models.SecretSync.from_body(body)
    fetched = [desired.FetchedSource({"ks.p12": base64.b64encode(RAW).decode(), "USER": "bob"})]
    want = await desired.render_and_build(sync, fetched, hmac_key=b"k" * 32, renderer=pool)
    assert want.string_data == {"app.p12": RAW, "user": "bob"}
    assert want.manifest()["data"]["app.p12"] == base64.b64encode(RAW).decode()
    assert want == desired.build_desired(sync, fetched, hmac_key=b"k" * 32)
