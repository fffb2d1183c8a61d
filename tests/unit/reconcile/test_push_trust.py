"""Who may push what where (reconcile/push/trust.py)."""

from __future__ import annotations

import pytest

from secretferry.models import identity as identity_models
from secretferry.models import pushsecret as push_models
from secretferry.reconcile import reasons
from secretferry.reconcile.push import trust


@pytest.mark.parametrize(
    ("annotation", "allowed"),
    [(None, False), ("", False), ("other", False), ("push", True), ("a, push ,b", True), ("*", True)],
)
def test_the_source_must_opt_in_by_name(annotation: str | None, allowed: bool) -> None:
    annotations = {trust.ALLOW_PUSH_TO_ANNOTATION: "p1/prod/"}
    if annotation is not None:
        annotations[trust.ALLOW_PUSH_ANNOTATION] = annotation
    assert trust.opted_in(annotations, "push", dest("/x")) is allowed


@pytest.mark.parametrize(
    ("places", "path", "allowed"),
    [
        (None, "/x", False),  # a name alone is not enough: the place is the owner's to choose
        ("p1/prod/", "/any/where", True),
        ("p1/prod", "/any/where", True),
        ("p1/prod/shared", "/shared/db", True),
        ("p1/prod/shared", "/shared-other", False),
        ("p1/dev/shared", "/shared", False),
        ("p2/prod/", "/shared", False),
        ("junk, p1/prod/shared", "/shared", True),
        ("/prod/shared", "/shared", False),
    ],
)
def test_the_source_must_opt_in_to_the_place(places: str | None, path: str, allowed: bool) -> None:
    annotations = {trust.ALLOW_PUSH_ANNOTATION: "*"}
    if places is not None:
        annotations[trust.ALLOW_PUSH_TO_ANNOTATION] = places
    assert trust.opted_in(annotations, "push", dest(path)) is allowed


def test_a_place_names_the_project_as_the_pushsecret_does() -> None:
    annotations = {trust.ALLOW_PUSH_ANNOTATION: "*", trust.ALLOW_PUSH_TO_ANNOTATION: "shop/prod/"}
    assert trust.opted_in(annotations, "push", dest("/", slug="shop"))
    assert not trust.opted_in(annotations, "push", dest("/", project_id="p1"))


def test_the_refusal_does_not_say_whether_the_secret_exists() -> None:
    problem = trust.not_opted_in(namespace="ns", secret="db", push_name="push")
    assert problem.reason == reasons.PUSH_SOURCE_NOT_OPTED_IN
    assert "does not exist or has not opted in" in problem.message


def dest(path: str, *, env: str = "prod", project_id: str | None = "p1", slug: str | None = None):  # type: ignore[no-untyped-def]
    return push_models.Destination(
        project_id=None if slug else project_id, project_slug=slug, environment=env, path=path
    )


def scope(prefix: str, **extra: str) -> identity_models.PushScope:
    return identity_models.PushScope.model_validate(
        {"projectId": "p1", "environment": "prod", "pathPrefix": prefix, **extra}
    )


@pytest.mark.parametrize(
    ("prefix", "path", "allowed"),
    [
        ("/", "/anything/below", True),
        ("/shared", "/shared", True),
        ("/shared", "/shared/db", True),
        ("/shared/", "/shared/db", True),
        ("/shared", "/shared-other", False),
        ("/shared", "/", False),
    ],
)
def test_path_prefixes_compare_whole_segments(prefix: str, path: str, allowed: bool) -> None:
    assert trust.push_allowed([scope(prefix)], dest(path)) is allowed


def test_project_and_environment_must_match() -> None:
    assert not trust.push_allowed([scope("/")], dest("/", env="dev"))
    assert not trust.push_allowed([scope("/")], dest("/", project_id="p2"))
    # A slug never matches an ID: the admin's list is read literally.
    assert not trust.push_allowed([scope("/")], dest("/", slug="p1"))


def test_an_empty_allow_list_refuses_every_push() -> None:
    spec = identity_models.ClusterMachineIdentitySpec.model_validate(
        {"auth": {"accessToken": {"secretRef": {"name": "t", "key": "k", "namespace": "x"}}}}
    )
    problem = trust.check_cluster_identity(spec, identity="shared", destination=dest("/"))
    assert problem is not None and problem.reason == reasons.PUSH_NOT_ALLOWED
    assert "is empty" in problem.message
