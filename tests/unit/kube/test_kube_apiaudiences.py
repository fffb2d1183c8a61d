"""kube.apiaudiences: the apiserver's audiences from our own mounted token, or a TokenRequest answer."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, cast

import pytest

from secretferry.kube import apiaudiences, errors
from secretferry.kube.client import Kube

API = "https://kubernetes.default.svc.cluster.local"


def _jwt(claims: object) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{payload}.sig"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (_jwt({"aud": [API, "other"]}), {API, "other"}),
        (_jwt({"aud": API}), {API}),
        (_jwt({"iss": "kubernetes/serviceaccount"}), set()),  # a legacy token: no aud claim
        ("not-a-jwt", set()),
        ("a.!!!.c", set()),
    ],
)
def test_from_jwt(token: str, expected: set[str]) -> None:
    assert apiaudiences.from_jwt(token) == expected


class _Kube:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, path, kwargs.get("body")))
        return self.answer


async def test_the_mounted_token_wins_and_nothing_is_asked(tmp_path: Path) -> None:
    own = tmp_path / "token"
    own.write_text(_jwt({"aud": [API]}))
    kube = _Kube({})
    assert await apiaudiences.learn(cast(Kube, kube), namespace="ops", own_token=own) == {API}
    assert kube.calls == []


async def test_outside_a_pod_a_token_request_without_audiences_tells(tmp_path: Path) -> None:
    kube = _Kube({"spec": {"audiences": [API]}, "status": {"token": "dropped"}})
    learnt = await apiaudiences.learn(cast(Kube, kube), namespace="ops", own_token=tmp_path / "none")
    assert learnt == {API}
    [(method, path, body)] = kube.calls
    assert (method, path) == ("POST", "/api/v1/namespaces/ops/serviceaccounts/default/token")
    assert "audiences" not in body["spec"]


async def test_an_answer_without_audiences_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(errors.KubeError):
        await apiaudiences.learn(cast(Kube, _Kube({"spec": {}})), namespace="ops", own_token=tmp_path / "x")
