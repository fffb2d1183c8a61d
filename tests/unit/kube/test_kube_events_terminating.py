"""Events in a namespace being deleted: none posted, one DEBUG line, no WARNING per object.

No apiserver: a local fake Kube port answers an Event POST with the apiserver's own refusal, parsed
by ``errors.from_status`` exactly as the real client does. The memory of terminating namespaces
runs on a fake clock.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import pytest
from clock_fakes import Clock

from secretferry import logfields
from secretferry.kube import client as kube_client
from secretferry.kube import errors, events

NAMESPACE = "team-a"


def _status(code: int, body: dict[str, Any]) -> errors.KubeError:
    return errors.from_status(code, json.dumps({"kind": "Status", "apiVersion": "v1", **body}).encode())


def terminating_refusal(namespace: str = NAMESPACE) -> errors.KubeError:
    """What the NamespaceLifecycle admission plugin answers a create in a terminating namespace."""
    return _status(
        403,
        {
            "status": "Failure",
            "message": f'events.events.k8s.io "app.18a" is forbidden: unable to create new content in'
            f" namespace {namespace} because it is being terminated",
            "reason": "Forbidden",
            "details": {
                "name": "app.18a",
                "group": "events.k8s.io",
                "kind": "events",
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            },
            "code": 403,
        },
    )


def namespace_gone(namespace: str = NAMESPACE) -> errors.KubeError:
    """The same plugin's answer once the namespace is gone altogether."""
    return _status(
        404,
        {
            "status": "Failure",
            "message": f'namespaces "{namespace}" not found',
            "reason": "NotFound",
            "details": {"name": namespace, "kind": "namespaces"},
            "code": 404,
        },
    )


def rbac_refusal() -> errors.KubeError:
    return _status(
        403,
        {
            "status": "Failure",
            "message": 'events.events.k8s.io is forbidden: User "system:serviceaccount:x:y" cannot create'
            ' resource "events" in API group "events.k8s.io" in the namespace "team-a"',
            "reason": "Forbidden",
            "details": {"group": "events.k8s.io", "kind": "events"},
            "code": 403,
        },
    )


class RefusingKube:
    """Answers every request with ``refusal`` (or {} when None), and counts them."""

    def __init__(self, refusal: errors.KubeError | None) -> None:
        self.refusal = refusal
        self.posts: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.posts.append(path)
        if self.refusal is not None:
            raise self.refusal
        return {}

    def port(self) -> kube_client.Kube:
        return cast(kube_client.Kube, self)


def _regarding(name: str, namespace: str = NAMESPACE) -> events.ObjectRef:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
    }


async def _post(kube: RefusingKube, memory: events.TerminatingNamespaces, name: str, **kw: Any) -> bool:
    return await events.post(
        kube.port(),
        regarding=_regarding(name, **kw),
        reason="IdentityNotFound",
        note="MachineIdentity 'mid' in namespace team-a does not exist",
        type="Warning",
        action="Sync",
        reporting_instance="secretferry-0",
        namespaces=memory,
    )


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == events.__name__ and r.levelno == level]


@pytest.mark.parametrize("refusal", [terminating_refusal(), namespace_gone()], ids=["terminating", "gone"])
async def test_a_namespace_being_deleted_gets_no_events_and_one_debug_line(
    refusal: errors.KubeError, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=events.__name__)
    kube = RefusingKube(refusal)
    memory = events.TerminatingNamespaces(clock=Clock())

    posted = [await _post(kube, memory, f"app-{i}") for i in range(50)]

    assert posted == [False] * 50
    assert len(kube.posts) == 1  # the first refusal is remembered: the other 49 are not even sent
    assert NAMESPACE in memory
    assert _lines(caplog, logging.WARNING) == []
    (debug,) = _lines(caplog, logging.DEBUG)
    assert NAMESPACE in debug.getMessage()
    assert getattr(debug, logfields.NAMESPACE) == NAMESPACE


async def test_another_namespace_is_not_affected() -> None:
    kube = RefusingKube(terminating_refusal())
    memory = events.TerminatingNamespaces(clock=Clock())
    await _post(kube, memory, "app")

    kube.refusal = None
    assert await _post(kube, memory, "app", namespace="team-b") is True
    assert kube.posts[-1] == "/apis/events.k8s.io/v1/namespaces/team-b/events"
    assert "team-b" not in memory


async def test_the_memory_fades_so_a_recreated_namespace_gets_events_again() -> None:
    clock = Clock()
    kube = RefusingKube(terminating_refusal())
    memory = events.TerminatingNamespaces(memory_seconds=300, clock=clock)
    await _post(kube, memory, "app")

    clock.now += 299
    await _post(kube, memory, "app")
    assert len(kube.posts) == 1

    clock.now += 1
    assert NAMESPACE not in memory
    kube.refusal = None  # recreated under the same name
    assert await _post(kube, memory, "app") is True
    assert len(kube.posts) == 2


async def test_any_other_refusal_is_a_warning_every_time_and_not_remembered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=events.__name__)
    kube = RefusingKube(rbac_refusal())
    memory = events.TerminatingNamespaces(clock=Clock())

    await _post(kube, memory, "app")
    await _post(kube, memory, "app")

    assert len(kube.posts) == 2
    assert NAMESPACE not in memory
    warnings = _lines(caplog, logging.WARNING)
    assert len(warnings) == 2
    fields = {f: getattr(warnings[0], f, None) for f in logfields.FIELDS}
    assert fields == {
        logfields.KIND: "SecretSync",
        logfields.NAMESPACE: NAMESPACE,
        logfields.NAME: "app",
        logfields.IDENTITY: None,
        logfields.SCOPE: None,
        logfields.REASON: "IdentityNotFound",
        logfields.TARGET: None,
    }


def test_the_process_memory_answers_terminating(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = events.TerminatingNamespaces(clock=Clock())
    monkeypatch.setattr(events, "TERMINATING", memory)
    assert not events.terminating(NAMESPACE)
    assert memory.seen(NAMESPACE) is True
    assert memory.seen(NAMESPACE) is False  # already remembered: no second DEBUG line
    assert events.terminating(NAMESPACE)
    assert not events.terminating(None) and not events.terminating("")


@pytest.mark.parametrize(
    ("error", "going"),
    [
        (terminating_refusal(), True),
        (namespace_gone(), True),
        (rbac_refusal(), False),
        (errors.NotFound(404, "NotFound", 'secrets "x" not found', details_kind="secrets"), False),
        (errors.Unavailable(503, "ServiceUnavailable", "etcd busy"), False),
    ],
)
def test_namespace_going_tells_the_deletion_refusals_apart(error: errors.KubeError, going: bool) -> None:
    assert events.namespace_going(error) is going
