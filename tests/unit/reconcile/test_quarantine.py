"""secretferry.reconcile.rendering.quarantine: which failures hold a template back, and for how long."""

from __future__ import annotations

import pytest

from secretferry.reconcile.rendering import quarantine, templating

TEMPLATES = {"k": "{{ X }}"}


def failure(limit: templating.Limit | None) -> templating.TemplateRenderError:
    return templating.TemplateRenderError("k", f"hit {limit}", limit=limit)


@pytest.mark.parametrize(
    ("limit", "held"),
    [("cpu", True), ("memory", True), ("timeout", True), ("output", False), ("range", False), (None, False)],
)
def test_only_costly_limits_hold_a_template_back(limit: templating.Limit | None, held: bool) -> None:
    q = quarantine.Quarantine(clock=lambda: 0.0)
    key = q.key("ns", TEMPLATES)
    q.record(key, failure(limit))
    answer = q.held(key)
    assert (answer is not None) == held
    if answer is not None:
        assert (str(answer), answer.limit) == ("template 'k': hit " + str(limit), limit)


def test_the_wait_doubles_up_to_the_maximum_and_success_ends_it() -> None:
    now = [0.0]
    q = quarantine.Quarantine(clock=lambda: now[0])
    key = q.key("ns", TEMPLATES)
    waits = []
    for _ in range(8):
        q.record(key, failure("cpu"))
        start = now[0]
        while q.held(key) is not None:
            now[0] += 1.0
        waits.append(now[0] - start)
    assert waits == [10, 20, 40, 80, 160, 300, 300, 300]
    q.record(key, None)
    q.record(key, failure("cpu"))
    now[0] += 10.0
    assert q.held(key) is None, "after a success the next wait starts from 10 s again"


def test_keys_name_the_namespace_and_the_template_text() -> None:
    q = quarantine.Quarantine()
    assert q.key("a", TEMPLATES) == q.key("a", dict(TEMPLATES))
    assert q.key("a", TEMPLATES) != q.key("b", TEMPLATES)
    assert q.key("a", TEMPLATES) != q.key("a", {"k": "{{ Y }}"})
    assert q.key("a", TEMPLATES) != quarantine.Quarantine().key("a", TEMPLATES), "keyed per process"
