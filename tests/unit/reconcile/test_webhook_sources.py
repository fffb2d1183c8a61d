"""Who a webhook request comes from: the peer, or the client a trusted proxy names (spoofs included)."""

from __future__ import annotations

import pytest

from secretferry import settings as settings_mod
from secretferry.reconcile import webhook_sources as ws

INGRESS = ws.parse_networks("10.42.0.0/16, fd00:42::/64")  # the ingress controller's pods
SERVICE = "198.51.100.7"  # the secrets service's egress address
ATTACKER = "203.0.113.66"


@pytest.mark.parametrize(
    ("peer", "values", "expected"),
    [
        # not a trusted proxy: the peer, whatever it writes
        (ATTACKER, [SERVICE], ATTACKER),
        (ATTACKER, [f"{SERVICE}, 10.42.0.9"], ATTACKER),
        ("10.43.0.1", [SERVICE], "10.43.0.1"),  # just outside the CIDR
        # the Ingress appends the address it received the request from
        ("10.42.0.9", [SERVICE], SERVICE),
        ("10.42.0.9", [ATTACKER], ATTACKER),
        # a spoof through the Ingress: the client's own entries stay left of the Ingress's, ignored
        ("10.42.0.9", [f"{SERVICE}, {ATTACKER}"], ATTACKER),
        ("10.42.0.9", [f"{SERVICE}, 10.42.0.5, {ATTACKER}"], ATTACKER),  # naming a trusted hop too
        ("10.42.0.9", [SERVICE, ATTACKER], ATTACKER),  # a second header line of its own: still left
        # a chain of trusted proxies is walked (real_ip_recursive)
        ("10.42.0.9", [f"{ATTACKER}, {SERVICE}, 10.42.0.3"], SERVICE),
        ("10.42.0.9", ["10.42.0.1, 10.42.0.3"], "10.42.0.1"),  # all trusted: the left-most
        # no header: the proxy itself
        ("10.42.0.9", [], "10.42.0.9"),
        ("10.42.0.9", [""], "10.42.0.9"),
        # not an address: the trusted hop that wrote it (never a value the client chose)
        ("10.42.0.9", [f"{SERVICE}, unknown"], "10.42.0.9"),
        ("10.42.0.9", [f"{SERVICE}, garbage, 10.42.0.3"], "10.42.0.3"),
        # ports, brackets, IPv6, IPv4-mapped peers
        ("10.42.0.9", [f"{SERVICE}:4711"], SERVICE),
        ("10.42.0.9", ["[2001:db8::7]:443"], "2001:db8::7"),
        ("fd00:42::9", ["2001:db8::7"], "2001:db8::7"),
        ("::ffff:10.42.0.9", [SERVICE], SERVICE),
        ("?", [SERVICE], "?"),
    ],
)
def test_x_forwarded_for_is_read_only_from_trusted_proxies(
    peer: str, values: list[str], expected: str
) -> None:
    assert ws.client_address(peer, values, trusted=INGRESS) == expected


def test_without_trusted_proxies_the_header_is_ignored() -> None:
    assert ws.client_address("10.42.0.9", [SERVICE], trusted=()) == "10.42.0.9"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([f"for={SERVICE};proto=https"], SERVICE),
        ([f'for={SERVICE}, for="[2001:db8::7]:4711";by=10.42.0.9'], "2001:db8::7"),
        ([f"for={SERVICE}", f"For={ATTACKER}"], ATTACKER),  # two lines: one list; names are case-blind
        ([f"for={SERVICE}, for=_hidden"], "10.42.0.9"),  # obfuscated: the proxy that wrote it
        ([f"for={SERVICE}, proto=https"], "10.42.0.9"),  # an element without for=
        # a quote opened by the client cannot swallow the element the Ingress appends
        ([f'for="{SERVICE}, for={ATTACKER}'], ATTACKER),
    ],
)
def test_forwarded_is_read_when_named(values: list[str], expected: str) -> None:
    assert ws.client_address("10.42.0.9", values, trusted=INGRESS, header=ws.FORWARDED) == expected


def test_networks_parse_and_a_typo_stops_start_up() -> None:
    assert [str(n) for n in ws.parse_networks(" 10.0.0.0/8 ,192.0.2.1,, ::1 ")] == [
        "10.0.0.0/8",
        "192.0.2.1/32",
        "::1/128",
    ]
    with pytest.raises(ValueError, match="ingress"):
        ws.parse_networks("10.0.0.0/8, ingress")
    with pytest.raises(ValueError, match="webhook_trusted_proxies"):
        settings_mod.Settings(webhook_trusted_proxies="10.0.0.0/33")
