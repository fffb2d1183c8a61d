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
    def __init__(self, answer: dict[str, Any], *, bearer: str | None = None) -> None:
        self.answer = answer
        self.bearer = bearer
        self.calls: list[tuple[str, str, Any]] = []

    def bearer_token(self) -> str | None:
        return self.bearer

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


SA_CLAIMS = {"aud": [API], "kubernetes.io": {"namespace": "ops", "serviceaccount": {"name": "op"}}}


async def test_a_service_account_token_in_a_kubeconfig_tells_without_a_call(tmp_path: Path) -> None:
    """Outside a pod, authenticated as a ServiceAccount (the chart's, in a token kubeconfig): its
    own ``aud`` are the apiserver's, and no TokenRequest (which its RBAC may not allow) is made."""
    kube = _Kube({}, bearer=_jwt(SA_CLAIMS))
    assert await apiaudiences.learn(cast(Kube, kube), namespace="ops", own_token=tmp_path / "none") == {API}
    assert kube.calls == []


@pytest.mark.parametrize(
    "bearer",
    [
        _jwt({"aud": ["my-oidc-client"], "iss": "https://idp.example"}),  # an OIDC user: aud = client id
        _jwt({"aud": [API]}),  # no kubernetes.io claim: not known to be a ServiceAccount token
        "opaque-static-token",
        None,  # a client certificate
    ],
)
async def test_other_credentials_fall_back_to_a_token_request(tmp_path: Path, bearer: str | None) -> None:
    kube = _Kube({"spec": {"audiences": [API]}}, bearer=bearer)
    assert await apiaudiences.learn(cast(Kube, kube), namespace="ops", own_token=tmp_path / "none") == {API}
    assert len(kube.calls) == 1
