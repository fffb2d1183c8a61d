"""Collection paths of what the controller lists and watches, and the one-request LIST of our
custom resources."""

from __future__ import annotations

from typing import Any, cast

import pytest

from secretferry.kube import client, customresources, objects, watching


@pytest.mark.parametrize(
    ("plural", "namespace", "expected"),
    [
        ("secretsyncs", None, "/apis/secretferry.io/v1alpha1/secretsyncs"),
        ("clustermachineidentities", None, "/apis/secretferry.io/v1alpha1/clustermachineidentities"),
        ("machineidentities", "team-a", "/apis/secretferry.io/v1alpha1/namespaces/team-a/machineidentities"),
    ],
)
def test_custom_resource_collections(plural: str, namespace: str | None, expected: str) -> None:
    assert customresources.collection_path(plural, namespace=namespace) == expected


def test_a_cluster_wide_collection_narrowed_by_the_watch_is_the_namespaced_one() -> None:
    wide = customresources.collection_path("machineidentities")
    narrowed = customresources.collection_path("machineidentities", namespace="ns")
    assert watching.scoped_path(wide, "ns") == narrowed


@pytest.mark.parametrize(
    ("kind", "expected"), [("Secret", "/api/v1/secrets"), ("ConfigMap", "/api/v1/configmaps")]
)
def test_managed_object_collections(kind: objects.Kind, expected: str) -> None:
    assert objects.collection_path(kind) == expected
    assert watching.scoped_path(expected, "ns") == objects.path(kind, "ns")


def test_an_unsupported_kind_has_no_collection() -> None:
    with pytest.raises(ValueError, match="unsupported kind 'Pod'"):
        objects.collection_path(cast(objects.Kind, "Pod"))


class ListingKube:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.requests.append((method, path))
        return self.answer


async def test_list_items_reads_the_collection_in_one_request() -> None:
    kube = ListingKube({"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]})
    items = await customresources.list_items(
        cast(client.Kube, kube), plural="machineidentities", namespace="ns"
    )
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert kube.requests == [("GET", "/apis/secretferry.io/v1alpha1/namespaces/ns/machineidentities")]


async def test_an_empty_listing_has_no_items() -> None:
    kube = ListingKube({"items": None})
    assert await customresources.list_items(cast(client.Kube, kube), plural="secretsyncs") == []
