"""TemporaryPrivilege status: Active follows the service's window; transition times stay put."""

from __future__ import annotations

import datetime

from secretferry.reconcile import problems, reasons
from secretferry.reconcile.privileges import report

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
HOUR = datetime.timedelta(hours=1)
GRANT = report.Grant(privilege_id="p1", slug="s", start=T0, end=T0 + HOUR)


def test_active_follows_the_window() -> None:
    assert report.active(GRANT, T0 - HOUR)[:2] == ("False", reasons.PENDING)
    assert report.active(GRANT, T0)[:2] == ("True", reasons.ACTIVE)
    assert report.active(GRANT, T0 + HOUR)[:2] == ("False", reasons.EXPIRED)  # the end is exclusive
    assert report.active(None, T0)[:2] == ("False", reasons.NOT_GRANTED)
    permanent = report.Grant(privilege_id="p", slug="s", start=None, end=None)
    assert report.active(permanent, T0)[:2] == ("True", reasons.ACTIVE)


def test_next_change_is_the_next_edge_of_the_window() -> None:
    assert report.next_change(GRANT, T0 - HOUR) == 3600
    assert report.next_change(GRANT, T0 + HOUR / 2) == 1800
    assert report.next_change(GRANT, T0 + HOUR) is None
    assert report.next_change(None, T0) is None


def test_status_at_expiry_moves_only_active() -> None:
    granted = report.status({}, grant=GRANT, problem=None, generation=1, start=T0, checked_at=T0, now=T0)
    assert granted["privilegeId"] == "p1" and granted["expiresAt"] == "2030-01-01T01:00:00Z"
    assert report.reasons_of(granted) == {reasons.READY: reasons.GRANTED, reasons.ACTIVE: reasons.ACTIVE}
    later = T0 + HOUR
    expired = report.status(
        granted, grant=GRANT, problem=None, generation=1, start=T0, checked_at=None, now=later
    )
    assert report.reasons_of(expired) == {reasons.READY: reasons.GRANTED, reasons.ACTIVE: reasons.EXPIRED}
    ready = {c["type"]: c for c in expired["conditions"]}
    assert ready[reasons.READY]["lastTransitionTime"] == "2030-01-01T00:00:00Z"  # unchanged
    assert ready[reasons.ACTIVE]["lastTransitionTime"] == "2030-01-01T01:00:00Z"
    assert expired["lastCheckedTime"] == "2030-01-01T00:00:00Z"  # no read at expiry
    assert report.state(GRANT, None, later) == report.EXPIRED


def test_a_failed_read_keeps_what_was_known() -> None:
    granted = report.status({}, grant=GRANT, problem=None, generation=1, start=T0, checked_at=T0, now=T0)
    problem = problems.Problem(reasons.SERVICE_UNAVAILABLE, "down", retriable=True)
    failed = report.status(
        granted, grant=None, problem=problem, generation=1, start=T0, checked_at=None, now=T0
    )
    assert failed["privilegeId"] == "p1" and failed["expiresAt"] == granted["expiresAt"]
    assert report.reasons_of(failed)[reasons.READY] == reasons.SERVICE_UNAVAILABLE
    assert report.reasons_of(failed)[reasons.ACTIVE] == reasons.ACTIVE  # left as it was
    assert report.state(None, problem, T0) == report.FAILED


def test_a_first_failure_says_not_granted() -> None:
    problem = problems.Problem(reasons.PERMANENT_NOT_ALLOWED, "off")
    refused = report.status(
        {}, grant=None, problem=problem, generation=1, start=None, checked_at=None, now=T0
    )
    assert report.reasons_of(refused) == {
        reasons.READY: reasons.PERMANENT_NOT_ALLOWED,
        reasons.ACTIVE: reasons.NOT_GRANTED,
        reasons.STALLED: reasons.PERMANENT_NOT_ALLOWED,  # kstatus: Failed until the spec changes
    }
    assert "privilegeId" not in refused and "expiresAt" not in refused
