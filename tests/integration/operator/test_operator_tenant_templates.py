"""A hostile tenant tries to read a value it may not read through templates and the data HMAC.

The value is the admin's, at the service, readable by the identity the tenant's SecretSyncs use;
the tenant (``hostile``: a namespace user's rights, no Secret read) sees only what the operator
shows it: the SecretSyncs' status, read here with the tenant's own credentials. Issue 20's two
attacks, replayed for real against the operator:

- **recovery**: two calibration SecretSyncs write ``Y`` and ``N``; one per (character, bit) writes
  ``{{ 'Y' if v[i] in "<chars with bit b set>" else 'N' }}``; comparing each probe's
  ``status.dataHMAC`` (or its Ready reason) with the calibrations' read the value bit by bit.
  Reduced to the value's first 3 characters: 21 probes, 23 SecretSyncs.
- **guess confirmation**: a SecretSync syncing the real secret and one writing a guess (from a
  template, or from a path the tenant writes, in another namespace) had equal HMACs exactly when
  the guess was right.

Both must fail: (a) against an identity not opted in to templates, every templated SecretSync is
refused (``TemplatesNotAllowed``) with one and the same status, so nothing differs between probes;
(b) with templates allowed, the HMACs of equal data in two objects, two namespaces, or one object
before and after an edit differ, so no comparison says anything. Control checks make sure each
attack had its chance: the probes ran (read by the admin from the Secrets they wrote), the copies
hold equal data. The value is never printed: comparisons are reduced to booleans first.
"""

from __future__ import annotations

import json
import secrets
import string
import time
from pathlib import Path
from typing import Any

import harness
import pytest
import tenant
from harness import PROJECT_ID, eventually, secret_data, source

from secretferry.devcluster.cluster import ControlPlane
from secretferry.devcluster.operator_process import OperatorProcess
from secretferry.devserver.testing import DevServer

pytestmark = pytest.mark.integration

KEY = "ADMIN_PASSWORD"
ATTACKED = 3  # characters recovered bit by bit: 3 x 7 probes + 2 calibrations = 23 SecretSyncs
BITS = 7  # the value's characters are ASCII letters and digits
ALPHABET = string.ascii_letters + string.digits
# The test operator retries a refusal after at most 3 s: a little longer lets one retry pass.
RETRY_WINDOW_SECONDS = 4.0


def admin_value() -> str:
    """A fresh admin-only value: attacked prefix first, then enough to be leak-checked."""
    return "".join(secrets.choice(ALPHABET) for _ in range(20))


def with_bit(bit: int) -> str:
    return "".join(c for c in ALPHABET if ord(c) >> bit & 1)


def sync(
    namespace: str, name: str, *, path: str, target: dict[str, Any], identity: str = "ferry", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identityRef": {"name": identity},
            "sources": [source(path, includeKeys=[KEY])],
            "target": target,
            **spec,
        },
    }


def probes(namespace: str, path: str) -> list[dict[str, Any]]:
    """The recovery attack's SecretSyncs: calibrations ``cal-y``/``cal-n``, probes ``bit-<i>-<b>``."""
    made = [
        sync(namespace, "cal-y", path=path, target={"template": {"data": {"bit": "Y"}}}),
        sync(namespace, "cal-n", path=path, target={"template": {"data": {"bit": "N"}}}),
    ]
    for i in range(ATTACKED):
        for b in range(BITS):
            probe = f"{{{{ 'Y' if {KEY}[{i}] in \"{with_bit(b)}\" else 'N' }}}}"
            made.append(
                sync(namespace, f"bit-{i}-{b}", path=path, target={"template": {"data": {"bit": probe}}})
            )
    return made


def apply_all(attacker: tenant.Tenant, manifests: list[dict[str, Any]]) -> None:
    attacker.apply({"apiVersion": "v1", "kind": "List", "items": manifests})


def seen(attacker: tenant.Tenant) -> dict[str, dict[str, Any]]:
    """What the tenant can read of every SecretSync in its namespace: name -> status."""
    listed = json.loads(attacker.kubectl("get", "secretsyncs", "-n", attacker.namespace, "-o", "json"))
    return {item["metadata"]["name"]: item.get("status") or {} for item in listed["items"]}


def reason(status: dict[str, Any]) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("reason"))
    return None


def settled(
    attacker: tenant.Tenant, names: set[str], *, expect: str, timeout: float = 60.0
) -> dict[str, Any]:
    """Every SecretSync in ``names`` Ready with reason ``expect``, as the tenant sees it."""

    def check() -> dict[str, dict[str, Any]] | None:
        statuses = {name: status for name, status in seen(attacker).items() if name in names}
        done = len(statuses) == len(names) and all(reason(s) == expect for s in statuses.values())
        return statuses if done else None

    return eventually(check, timeout=timeout, what=f"{len(names)} SecretSyncs {expect}")


def bit_of(signal: Any, *, yes: Any, no: Any) -> int | None:
    """What a probe's signal says when compared with the calibrations' (None: nothing)."""
    if signal == yes and signal != no:
        return 1
    if signal == no and signal != yes:
        return 0
    return None


def reconstruct(signals: dict[str, Any]) -> str | None:
    """The attacker's reading of the first ``ATTACKED`` characters, or None where a bit is unread."""
    chars = []
    for i in range(ATTACKED):
        code = 0
        for b in range(BITS):
            bit = bit_of(signals[f"bit-{i}-{b}"], yes=signals["cal-y"], no=signals["cal-n"])
            if bit is None:
                return None
            code |= bit << b
        chars.append(chr(code))
    return "".join(chars)


def readable_bits(signals: dict[str, Any]) -> int:
    return sum(
        bit_of(signals[f"bit-{i}-{b}"], yes=signals["cal-y"], no=signals["cal-n"]) is not None
        for i in range(ATTACKED)
        for b in range(BITS)
    )


def observable(status: dict[str, Any]) -> str:
    """Everything in a status a probe could differ by, except timestamps."""
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    shown = {k: v for k, v in status.items() if k not in ("conditions", "lastSyncTime", "target")}
    shown["ready"] = {k: v for k, v in ready.items() if k != "lastTransitionTime"}
    return json.dumps(shown, sort_keys=True)


def other_tenant(cp: ControlPlane, namespace: str, *, workdir: Path) -> tenant.Tenant:
    cp.kubectl("create", "namespace", namespace)
    return tenant.make_tenant(cp, namespace, workdir)


# --- (a) an identity not opted in to templates -------------------------------------------------------


def test_the_recovery_attack_reads_nothing_through_an_identity_not_opted_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}-admin"
    value = admin_value()
    service.set_secret(PROJECT_ID, "dev", path, KEY, value)
    # The namespace owner let the identity log in (allowed-identities), not template.
    harness.kubernetes_identity(control_plane, namespace, templates=False)
    attack = probes(namespace, path)

    apply_all(hostile, attack)

    names = {m["metadata"]["name"] for m in attack}
    statuses = settled(hostile, names, expect="TemplatesNotAllowed")
    # Every probe and both calibrations look exactly alike: no HMAC, no key count, one message.
    assert len({observable(s).replace(n, "") for n, s in statuses.items()}) == 1
    assert all("dataHMAC" not in s and "syncedKeys" not in s for s in statuses.values())
    message = next(iter(statuses.values()))["conditions"][0]["message"]
    assert harness.ALLOW_TEMPLATES in message and "ServiceAccount" in message
    for signals in (
        {n: s.get("dataHMAC") for n, s in statuses.items()},
        {n: observable(s) for n, s in statuses.items()},
    ):
        assert readable_bits(signals) == 0
        recovered = reconstruct(signals) == value[:ATTACKED]
        assert not recovered, "the attack recovered the admin's value"
    # Still so after the retries, and nothing was written anywhere.
    time.sleep(RETRY_WINDOW_SECONDS)
    assert {reason(s) for n, s in seen(hostile).items() if n in names} == {"TemplatesNotAllowed"}
    assert all(secret_data(control_plane, namespace, name) is None for name in names)


def test_a_guess_is_not_confirmed_through_an_identity_not_opted_in(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}-admin"
    value = admin_value()
    service.set_secret(PROJECT_ID, "dev", path, KEY, value)
    harness.kubernetes_identity(control_plane, namespace, templates=False)
    half = len(value) // 2  # the guess as two literals: the value itself never sits in a manifest
    right = f"{{{{ '{value[:half]}' ~ '{value[half:]}' }}}}"
    wrong = "{{ 'not' ~ '-the-value' }}"
    apply_all(
        hostile,
        [
            sync(namespace, "real", path=path, target={}),  # no template: allowed, syncs the value itself
            sync(namespace, "guess-right", path=path, target={"template": {"data": {KEY: right}}}),
            sync(namespace, "guess-wrong", path=path, target={"template": {"data": {KEY: wrong}}}),
        ],
    )

    real = settled(hostile, {"real"}, expect="Synced")["real"]
    guesses = settled(hostile, {"guess-right", "guess-wrong"}, expect="TemplatesNotAllowed")
    assert real.get("dataHMAC")
    assert all("dataHMAC" not in s for s in guesses.values())
    alike = observable(guesses["guess-right"]).replace("guess-right", "") == observable(
        guesses["guess-wrong"]
    ).replace("guess-wrong", "")
    assert alike, "the right guess and the wrong one look different to the tenant"
    assert secret_data(control_plane, namespace, "guess-right") is None


# --- (b) templates allowed: the HMAC compares nothing across objects -----------------------------------


def test_the_recovery_attack_reads_nothing_from_hmacs(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    """Templates allowed (the owner trusts this namespace with the values): the HMAC alone must
    still not be a fingerprint. Equal outputs in different SecretSyncs give different HMACs."""
    path = f"/{namespace}-admin"
    value = admin_value()
    service.set_secret(PROJECT_ID, "dev", path, KEY, value)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    attack = probes(namespace, path)

    apply_all(hostile, attack)

    names = {m["metadata"]["name"] for m in attack}
    statuses = settled(hostile, names, expect="Synced")
    hmacs = {n: s.get("dataHMAC") for n, s in statuses.items()}
    assert all(hmacs.values()) and len(set(hmacs.values())) == len(hmacs)  # 23 distinct
    assert readable_bits(hmacs) == 0
    recovered = reconstruct(hmacs) == value[:ATTACKED]
    assert not recovered, "the attack recovered the admin's value from the HMACs"
    # Control: the probes did compute the bits (read by the admin, who may read the Secrets), so
    # only the HMAC stood between the tenant and the value.
    written = {n: (secret_data(control_plane, namespace, n) or {}).get("bit") for n in names}
    from_data = reconstruct(written) == value[:ATTACKED]
    assert from_data, "the probes did not compute the value's bits: the attack was not real"


def test_equal_data_in_two_namespaces_or_across_an_edit_gives_unequal_hmacs(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
    tmp_path: Path,
) -> None:
    path = f"/{namespace}-admin"
    value = admin_value()
    service.set_secret(PROJECT_ID, "dev", path, KEY, value)
    harness.kubernetes_identity(control_plane, namespace, templates=True)
    # The tenant's other namespace reads a path the tenant writes: its guess, with no template.
    elsewhere = f"{namespace}-b"
    attacker_b = other_tenant(control_plane, elsewhere, workdir=tmp_path)
    own_path = f"/{elsewhere}-own"
    service.set_secret(PROJECT_ID, "dev", own_path, KEY, value)  # the right guess
    harness.kubernetes_identity(control_plane, elsewhere)
    try:
        half = len(value) // 2
        apply_all(
            hostile,
            [
                sync(namespace, "real", path=path, target={}),
                sync(
                    namespace,
                    "guess",
                    path=path,
                    target={"template": {"data": {KEY: f"{{{{ '{value[:half]}' ~ '{value[half:]}' }}}}"}}},
                ),
                sync(
                    namespace, "edited", path=path, target={"template": {"data": {KEY: f"{{{{ {KEY} }}}}"}}}
                ),
            ],
        )
        apply_all(attacker_b, [sync(elsewhere, "copy", path=own_path, target={})])
        here = settled(hostile, {"real", "guess", "edited"}, expect="Synced")
        there = settled(attacker_b, {"copy"}, expect="Synced")
        before_edit = here["edited"]["dataHMAC"]
        # The same data again, from an edited template: another generation.
        hostile.apply(
            sync(
                namespace,
                "edited",
                path=path,
                target={"template": {"data": {KEY: f"{{{{ {KEY} | string }}}}"}}},
            )
        )

        def edited() -> dict[str, Any] | None:
            status = seen(hostile)["edited"]
            return status if status.get("observedGeneration") == 2 and reason(status) == "Synced" else None

        after_edit = eventually(edited, what="the edited SecretSync synced")["dataHMAC"]

        # Control: every copy holds the very same data (the admin reads the Secrets).
        copies = [
            secret_data(control_plane, namespace, "real"),
            secret_data(control_plane, namespace, "guess"),
            secret_data(control_plane, namespace, "edited"),
            secret_data(control_plane, elsewhere, "copy"),
        ]
        equal = all(c == {KEY: value} for c in copies)
        assert equal, "the copies do not hold equal data: the comparison would prove nothing"
        hmacs = [
            here["real"]["dataHMAC"],
            here["guess"]["dataHMAC"],
            before_edit,
            after_edit,
            there["copy"]["dataHMAC"],
        ]
        assert all(hmacs) and len(set(hmacs)) == len(hmacs)
    finally:
        control_plane.kubectl("delete", "namespace", elsewhere, "--wait=false", check=False)


# --- the opted-in path -----------------------------------------------------------------------------------


def test_templates_render_once_the_owner_opts_in_and_stop_when_the_opt_in_goes(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, KEY, "opted-in-value-1")
    harness.kubernetes_identity(control_plane, namespace, templates=False)
    templated = {"template": {"data": {"url": f"postgres://app:{{{{ {KEY} }}}}@db/app"}}}
    # Polled every 2 s whenever no event stream carries the change: the next pass comes either way.
    hostile.apply(sync(namespace, "dsn", path=path, target=templated, refreshInterval="2s"))
    harness.wait_reason(control_plane, namespace, "dsn", "TemplatesNotAllowed")

    # The ServiceAccount's owner opts in (the tenant could not: it may not edit ServiceAccounts).
    assert not hostile.can("patch", "serviceaccounts")
    annotate = ("annotate", "serviceaccount", "ferry-sa", "-n", namespace)
    control_plane.kubectl(*annotate, f"{harness.ALLOW_TEMPLATES}=ferry")
    eventually(
        lambda: (
            secret_data(control_plane, namespace, "dsn") == {"url": "postgres://app:opted-in-value-1@db/app"}
        ),
        what="the template rendered after the opt-in",
    )
    harness.wait_reason(control_plane, namespace, "dsn", "Synced")

    # Removed: the credential watch requeues the SecretSync at once (no timed cache), it is
    # refused, and the Secret keeps its data; a change at the service after it is refused too.
    started = time.monotonic()
    control_plane.kubectl(*annotate, f"{harness.ALLOW_TEMPLATES}-")
    harness.wait_reason(control_plane, namespace, "dsn", "TemplatesNotAllowed")
    print(f"opt-in removed → TemplatesNotAllowed: {time.monotonic() - started:.2f} s")
    service.set_secret(PROJECT_ID, "dev", path, KEY, "opted-in-value-2")
    time.sleep(3)  # a poll (2 s) and an event have come and gone
    assert (harness.ready(control_plane, namespace, "dsn") or {}).get("reason") == "TemplatesNotAllowed"
    assert secret_data(control_plane, namespace, "dsn") == {"url": "postgres://app:opted-in-value-1@db/app"}


def test_a_cluster_identity_allows_templates_only_with_allow_templates(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    service: DevServer,
    namespace: str,
    hostile: tenant.Tenant,
) -> None:
    path = f"/{namespace}"
    service.set_secret(PROJECT_ID, "dev", path, KEY, "cluster-template-value")
    name = f"{namespace}-cmid"
    control_plane.kubectl("create", "serviceaccount", f"{name}-sa", "-n", harness.OPERATOR_NAMESPACE)
    identity: dict[str, Any] = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "ClusterMachineIdentity",
        "metadata": {"name": name},
        "spec": {
            "allowedNamespaces": {"names": [namespace]},
            "auth": {
                "kubernetes": {
                    "identityId": harness.IDENTITY_ID,
                    "serviceAccountRef": {"name": f"{name}-sa", "namespace": harness.OPERATOR_NAMESPACE},
                    "audiences": [harness.AUDIENCE],
                }
            },
        },
    }
    control_plane.apply(identity)
    try:
        manifest = sync(
            namespace, "via-cluster", path=path, target={"template": {"data": {"v": f"{{{{ {KEY} }}}}"}}}
        )
        manifest["spec"]["identityRef"] = {"kind": "ClusterMachineIdentity", "name": name}
        hostile.apply(manifest)
        cond = harness.wait_reason(control_plane, namespace, "via-cluster", "TemplatesNotAllowed")
        assert "spec.allowTemplates: true" in cond["message"]

        identity["spec"]["allowTemplates"] = True  # a cluster admin's decision
        control_plane.apply(identity)
        eventually(
            lambda: secret_data(control_plane, namespace, "via-cluster") == {"v": "cluster-template-value"},
            what="the template rendered once the cluster identity allows templates",
        )
    finally:
        control_plane.kubectl("delete", "clustermachineidentity", name, "--wait=false", check=False)
