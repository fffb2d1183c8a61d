"""Status models: a misspelt field fails, and times go out exactly as Kubernetes writes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from secretferry import crdgen
from secretferry.models import base, identity, secretsync

STATUS_MODELS = [
    base.Condition,
    secretsync.SecretSyncStatus,
    secretsync.TargetStatus,
    identity.MachineIdentityStatus,
]


@pytest.mark.parametrize("model", STATUS_MODELS, ids=lambda m: m.__name__)
def test_a_misspelt_status_field_is_refused_not_dropped(model: type[base.StatusModel]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate({"syncedKey": ["A"]})


@pytest.mark.parametrize(
    ("moment", "wire"),
    [
        (datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC), "2026-03-01T12:00:05Z"),
        (datetime(2026, 3, 1, 12, 0, 5, 999999, tzinfo=UTC), "2026-03-01T12:00:05Z"),  # whole seconds
        (datetime(2026, 3, 1, 13, 0, 5, tzinfo=timezone(timedelta(hours=1))), "2026-03-01T12:00:05Z"),  # UTC
    ],
)
def test_status_times_are_written_as_kubernetes_writes_them(moment: datetime, wire: str) -> None:
    status = identity.MachineIdentityStatus(last_login_time=moment, token_expires_at=moment)
    dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == {"conditions": [], "lastLoginTime": wire, "tokenExpiresAt": wire}
    assert identity.MachineIdentityStatus.model_validate(dumped).model_dump(mode="json", by_alias=True) == (
        status.model_dump(mode="json", by_alias=True)
    )


def test_a_naive_time_cannot_get_into_a_status() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        secretsync.SecretSyncStatus(last_sync_time=datetime(2026, 3, 1, 12, 0, 5))


def test_a_status_dumps_to_the_names_of_the_crd() -> None:
    status = secretsync.SecretSyncStatus(
        conditions=[base.Condition(type="Ready", status="True", reason="Synced", observed_generation=1)],
        observed_generation=1,
        synced_keys=[],
        synced_key_count=0,
        data_hmac="ab" * 32,
        target=secretsync.TargetStatus(kind="Secret", name="app"),
        update_mode="Polling",
        update_mode_reason="stream unavailable",
    )
    dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    (crd,) = (c for c in crdgen.build_crds() if c["spec"]["names"]["kind"] == "SecretSync")
    names = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(dumped) <= set(names)
    assert dumped["syncedKeys"] == []  # an empty list is reported, not left out like an unknown one
    assert dumped["dataHMAC"] == "ab" * 32


def test_an_unset_status_field_is_left_out_of_a_patch() -> None:
    dumped = secretsync.SecretSyncStatus().model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == {"conditions": []}


@pytest.mark.parametrize("model", STATUS_MODELS, ids=lambda m: m.__name__)
def test_every_status_field_says_what_it_is(model: type[base.StatusModel]) -> None:
    undescribed = [name for name, field in model.model_fields.items() if not field.description]
    assert undescribed == []
