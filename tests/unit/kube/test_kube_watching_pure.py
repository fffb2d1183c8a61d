"""The pure parts of the watch loop: path scoping and backoff."""

from __future__ import annotations

import pytest

from secretferry.kube import watching


@pytest.mark.parametrize(
    ("path", "namespace", "expected"),
    [
        ("/api/v1/secrets", None, "/api/v1/secrets"),
        ("/api/v1/secrets", "ns", "/api/v1/namespaces/ns/secrets"),
        (
            "/apis/secretferry.io/v1alpha1/secretsyncs",
            "a",
            "/apis/secretferry.io/v1alpha1/namespaces/a/secretsyncs",
        ),
        (
            "/apis/secretferry.io/v1alpha1/secretsyncs/",
            "a",
            "/apis/secretferry.io/v1alpha1/namespaces/a/secretsyncs",
        ),
    ],
)
def test_scoped_path(path: str, namespace: str | None, expected: str) -> None:
    assert watching.scoped_path(path, namespace) == expected


@pytest.mark.parametrize(
    ("failures", "low", "high"),
    [(1, 0.25, 0.5), (2, 0.5, 1.0), (3, 1.0, 2.0), (10, 15.0, 30.0), (100, 15.0, 30.0)],
)
def test_backoff_grows_and_is_capped(failures: int, low: float, high: float) -> None:
    assert watching.backoff_delay(failures, rand=lambda: 0.0) == pytest.approx(low)
    assert watching.backoff_delay(failures, rand=lambda: 1.0) == pytest.approx(high)
