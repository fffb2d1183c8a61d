"""Stream planning (table-driven + invariants) and event routing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secretferry.service import events, scopes, streamplan

C, U, D, IMP = events.SECRET_CREATE, events.SECRET_UPDATE, events.SECRET_DELETE, events.SECRET_IMPORT_MUTATION


def S(env: str, path: str = "/", recursive: bool = False, imports: bool = True) -> scopes.Scope:
    return scopes.Scope("id", "p-1", env, path, recursive=recursive, include_imports=imports)


def filters(plan: streamplan.Plan) -> list[list[tuple[str, str, int]]]:
    """Per stream: (environment, pattern, number of kinds registered); "*" for no condition."""
    out = []
    for regs in plan.streams:
        counts: dict[tuple[str, str], int] = {}
        for r in regs:
            key = (r.environment_slug or "*", r.secret_path or "*")
            counts[key] = counts.get(key, 0) + 1
        out.append(sorted((env, path, n) for (env, path), n in counts.items()))
    return out


@pytest.mark.parametrize(
    ("scope_list", "expected"),
    [
        pytest.param([S("dev")], [[("dev", "/", 4)]], id="one-exact-root"),
        pytest.param(
            [S("dev", recursive=True)], [[("dev", "/", 4), ("dev", "/**", 4)]], id="recursive-root-both-forms"
        ),
        pytest.param([S("dev", "/a", imports=False)], [[("dev", "/a", 3)]], id="no-imports-no-import-kind"),
        pytest.param(
            [S("dev", "/a"), S("dev", "/b")], [[("dev", "/a", 4), ("dev", "/b", 4)]], id="two-precise"
        ),
        pytest.param(
            [S("dev", "/a/x"), S("dev", "/a/y"), S("dev", "/b")],
            [[("dev", "/", 4), ("dev", "/**", 4)]],
            id="subtree-and-folder-overflow-merge-to-root",
        ),
        pytest.param(
            [S("dev", "/a", imports=False), S("dev", "/b", imports=False), S("dev", "/c", imports=False)],
            [[("dev", "/a", 3), ("dev", "/b", 3), ("dev", "/c", 3)]],
            id="three-without-imports-fit-precisely",
        ),
        pytest.param(
            [S("dev", "/a", imports=False), S("dev", "/b", imports=False), S("dev", "/c")],
            [[("dev", "/a", 3), ("dev", "/b", 3), ("dev", "/c", 4)]],
            id="exactly-ten",
        ),
        pytest.param(
            [S("dev", "/a", recursive=True), S("dev", "/a/b"), S("dev", "/a/b/c", recursive=True)],
            [[("dev", "/a", 4), ("dev", "/a/**", 4)]],
            id="contained-filters-dropped",
        ),
        pytest.param(
            [S("dev", "/a"), S("dev", "/a", recursive=True)],
            [[("dev", "/a", 4), ("dev", "/a/**", 4)]],
            id="exact-in-subtree",
        ),
        pytest.param(
            [S("dev", "/a", recursive=True, imports=False), S("dev", "/a/b")],
            [[("dev", "/a", 4), ("dev", "/a/**", 4)]],
            id="imports-flag-moves-to-container",
        ),
        pytest.param(
            [S("dev", "/x/a"), S("dev", "/x/b"), S("dev", "/y/a"), S("dev", "/y/b")],
            [[("dev", "/", 4), ("dev", "/**", 4)]],
            id="two-subtrees-do-not-fit-one-stream",
        ),
        pytest.param(
            [S("dev", "/a"), S("dev", "/b"), S("dev", "/c"), S("dev", "/d")],
            [[("dev", "/", 4), ("dev", "/**", 4)]],
            id="merge-to-root-rather-than-a-second-stream",
        ),
        pytest.param(
            [S("dev", "/a"), S("prod", "/a"), S("stg", "/a")],
            [[("dev", "/a", 4), ("prod", "/a", 4)], [("stg", "/a", 4)]],
            id="environments-never-merge",
        ),
        pytest.param(
            [
                S("dev", "/a"),
                S("dev", "/b"),
                S("prod", "/a"),
                S("prod", "/b"),
                S("stg", "/a"),
                S("stg", "/b"),
            ],
            [
                [("dev", "/a", 4), ("dev", "/b", 4)],
                [("prod", "/a", 4), ("prod", "/b", 4)],
                [("stg", "/a", 4), ("stg", "/b", 4)],
            ],
            id="one-stream-per-environment-stays-precise",
        ),
    ],
)
def test_plan_table(scope_list: list[scopes.Scope], expected: list[list[tuple[str, str, int]]]) -> None:
    plan = streamplan.plan_registrations(scope_list)
    assert filters(plan) == expected
    assert not plan.uncovered
    assert set(plan.covered) == set(scope_list)


def test_registration_kinds() -> None:
    plan = streamplan.plan_registrations([S("dev", "/a", imports=False), S("dev", "/b")])
    kinds = {(r.secret_path, r.event) for r in plan.streams[0]}
    assert kinds == {("/a", C), ("/a", U), ("/a", D), ("/b", C), ("/b", U), ("/b", D), ("/b", IMP)}


def test_too_many_environments_share_a_project_wide_catch_all() -> None:
    # Merged, an environment is a subtree in both forms (8 items): one environment per stream, so
    # six environments get four streams of their own and the two smallest share the fifth.
    envs = [f"env{i:02d}" for i in range(6)]
    scope_list = [S(env, f"/s{j}") for i, env in enumerate(envs) for j in range(2 if i in (3, 5) else 3)]
    plan = streamplan.plan_registrations(scope_list)
    assert len(plan.streams) == 5 and not plan.uncovered
    assert all(len(regs) <= 10 for regs in plan.streams)
    catch_all = plan.streams[4]
    assert [(r.event, r.environment_slug, r.secret_path) for r in catch_all] == [
        (C, None, None),
        (U, None, None),
        (D, None, None),
        (IMP, None, None),
    ]
    assert {"event", "subject", "action"} == set(catch_all[0].to_wire())
    assert {s.environment for s in plan.scopes_of(4)} == {"env03", "env05"}
    assert {s.environment for i in range(4) for s in plan.scopes_of(i)} == {
        "env00",
        "env01",
        "env02",
        "env04",
    }


def test_max_streams_and_registrations_are_parameters() -> None:
    scope_list = [S(f"e{i}") for i in range(4)]
    plan = streamplan.plan_registrations(scope_list, max_streams=2, max_registrations=8)
    assert [len(regs) for regs in plan.streams] == [8, 8]  # two folders (4 kinds each) per stream
    plan = streamplan.plan_registrations(scope_list, max_streams=1, max_registrations=8)
    assert [len(regs) for regs in plan.streams] == [4] and not plan.uncovered  # only the catch-all
    assert plan.scopes_of(0) == set(scope_list)
    none = streamplan.plan_registrations(scope_list, max_streams=0, max_registrations=8)
    assert none.streams == [] and none.uncovered == set(scope_list)


def test_event_kinds_are_a_parameter() -> None:
    plan = streamplan.plan_registrations([S("dev")], events=(U,))
    assert [(r.event, r.secret_path) for r in plan.streams[0]] == [(U, "/")]
    only_imports = streamplan.plan_registrations([S("dev", imports=False)], events=(IMP,))
    assert only_imports.streams == [] and only_imports.uncovered == {S("dev", imports=False)}


def test_empty() -> None:
    plan = streamplan.plan_registrations([])
    assert plan.streams == [] and plan.covered == {} and plan.uncovered == set()


def test_deterministic_regardless_of_order() -> None:
    scope_list = [
        S(f"e{i % 4}", f"/p{i % 7}/q{i}", recursive=i % 3 == 0, imports=i % 2 == 0) for i in range(40)
    ]
    first = streamplan.plan_registrations(scope_list)
    shuffled = list(scope_list)
    random.Random(3).shuffle(shuffled)
    second = streamplan.plan_registrations(set(shuffled))
    assert first.streams == second.streams and first.covered == second.covered


def _glob_matches(pattern: str, path: str) -> bool:
    """Old and middle servers."""
    if pattern.endswith("/**"):
        return scopes.is_within(path, pattern[:-3] or "/")
    return pattern == path


def _prefix_matches(pattern: str, path: str) -> bool:
    """The newest server: ``payload.secretPath.startsWith(conditions.secretPath)``."""
    return path.startswith(pattern)


_scopes = st.builds(
    S,
    st.sampled_from(["dev", "prod", "stg", "qa", "e5", "e6", "e7", "e8", "e9", "e10", "e11", "e12"]),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.sets(_scopes, max_size=40))
def test_plan_invariants(scope_set: set[scopes.Scope]) -> None:
    plan = streamplan.plan_registrations(scope_set)
    assert len(plan.streams) <= 5
    assert all(1 <= len(regs) <= 10 for regs in plan.streams)
    assert set(plan.covered) | plan.uncovered == scope_set
    assert not set(plan.covered) & plan.uncovered
    for scope, index in plan.covered.items():
        # Every change the scope cares about is delivered on its stream, for every kind it needs.
        probe = scope.path + ("/x" if scope.recursive else "")
        needed = {C, U, D} | ({IMP} if scope.include_imports else set())
        for kind in needed:
            for matches in (_glob_matches, _prefix_matches):
                assert any(
                    r.event == kind
                    and (r.environment_slug is None or r.environment_slug == scope.environment)
                    and (r.secret_path is None or matches(r.secret_path, probe))
                    for r in plan.streams[index]
                ), (scope, kind, matches.__name__)
    # Nothing polls while five streams can carry it: at worst the last is a catch-all.
    assert not plan.uncovered


def test_twenty_scopes_over_paths_and_environments_fit_five_streams() -> None:
    envs = ["dev", "prod", "stg", "qa", "e5", "e6"]
    scope_list = [
        S(envs[i % 6], f"/svc{i}/{'deep' if i % 2 else ''}", recursive=i % 5 == 0) for i in range(20)
    ]
    plan = streamplan.plan_registrations(scope_list)
    assert len(plan.streams) <= 5 and not plan.uncovered


# --- routing ---------------------------------------------------------------------------------------


EXACT_A = S("dev", "/a")
SUBTREE_A = S("dev", "/a", recursive=True)
EXACT_AB = S("dev", "/a/b", imports=False)
PROD_A = S("prod", "/a", imports=False)
ROOT_ALL = S("dev", "/", recursive=True, imports=False)
ALL = [EXACT_A, SUBTREE_A, EXACT_AB, PROD_A, ROOT_ALL]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (events.SecretEvent(U, (events.EventItem("dev", "/a/b", "K"),)), {SUBTREE_A, EXACT_AB, ROOT_ALL}),
        (events.SecretEvent(C, (events.EventItem("dev", "/a", "K"),)), {EXACT_A, SUBTREE_A, ROOT_ALL}),
        (events.SecretEvent(D, (events.EventItem("prod", "/a", "K"),)), {PROD_A}),
        (events.SecretEvent(D, (events.EventItem("prod", "/a/b", "K"),)), set()),
        (events.SecretEvent(U, (events.EventItem("stg", "/a", "K"),)), set()),
        (
            events.SecretEvent(U, (events.EventItem("prod", "/a", "K"), events.EventItem("dev", "/z", "K"))),
            {PROD_A, ROOT_ALL},
        ),
        (events.SecretEvent(IMP, (events.EventItem("prod", "/a"),)), {PROD_A, EXACT_A, SUBTREE_A}),
        (events.SecretEvent(IMP, (events.EventItem("stg", "/q"),)), {EXACT_A, SUBTREE_A}),
        (events.SecretEvent(U, ()), set(ALL)),
    ],
)
def test_route(event: events.SecretEvent, expected: set[scopes.Scope]) -> None:
    assert streamplan.route(event, ALL) == expected
