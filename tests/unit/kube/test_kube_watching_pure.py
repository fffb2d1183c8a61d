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
