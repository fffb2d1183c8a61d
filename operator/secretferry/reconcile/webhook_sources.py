"""Who a webhook request comes from: the address its rate-limit bucket is keyed by.

Why: the per-source rate limit (``webhook_admission``) counts requests per client address. Behind an
Ingress every request's TCP peer is the ingress controller, so the service's webhooks and anyone
else's requests through the same Ingress would share one bucket. A proxy we run says who its client
was in ``X-Forwarded-For`` (or RFC 7239 ``Forwarded``); we read it only from proxies the installer
names (``webhook_trusted_proxies``), the way nginx's ``real_ip_recursive`` does:

- the TCP peer is not a trusted proxy (the default: the list is empty): the client is the peer, and
  every forwarding header is ignored. A client that reaches the port directly cannot choose its
  bucket, whatever it writes;
- the peer is a trusted proxy: the header's entries are walked from the right (each proxy appends
  the address it received the request from), skipping trusted proxies; the first address that is
  not one is the client. A client that sends its own ``X-Forwarded-For: <the service's address>``
  through the Ingress only adds entries to the *left* of the one the Ingress appends for it, and
  the walk stops at that one, so the spoofed entries are never read;
- an entry that is not an IP address (``unknown``, an obfuscated ``_hidden`` node, garbage) stops
  the walk: the client is then the trusted proxy that wrote it (the entry to its right, or the
  peer), so the request still gets a bucket no client chose;
- only the one header the installer names is read (``webhook_client_address_header``): a proxy
  that sets ``Forwarded`` passes a client's own ``X-Forwarded-For`` through unchanged, so reading
  "whichever is present" would let the client choose.

Entries are split on commas without honouring quoted strings: an entry a trusted proxy appends
never holds a comma (an address, maybe with a port), and everything left of the first untrusted
entry is never read, so a quote a client opens cannot swallow the proxy's entry.

What a bucket key buys: nothing but a bucket. The address is never used to reach anything, never
logged with a value, and a verified signature is still what makes a request do anything.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

X_FORWARDED_FOR = "X-Forwarded-For"
FORWARDED = "Forwarded"
HEADERS = (X_FORWARDED_FOR, FORWARDED)

# Entries walked at most: a real chain has a handful of proxies; the head is already capped at 8 KiB.
_MAX_HOPS = 32


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs or addresses (``10.0.0.0/8, 192.168.1.7``) → networks.

    Raises ValueError naming the entry that does not parse (a typo stops start-up)."""
    networks: list[Network] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not a CIDR or IP address") from None
    return tuple(networks)


def _address(text: str) -> Address | None:
    """An IP address, with or without a port or brackets (``1.2.3.4:80``, ``[::1]:80``), else None."""
    text = text.strip().strip('"').strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4 with a port (an IPv6 address has at least two colons)
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address, networks: Sequence[Network]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def _xff_entries(values: Iterable[str]) -> list[str]:
    return [entry for value in values for entry in value.split(",")]


def _forwarded_entries(values: Iterable[str]) -> list[str]:
    """The ``for=`` of each RFC 7239 element (empty when an element has none: it stops the walk)."""
    entries = []
    for value in values:
        for element in value.split(","):
            found = ""
            for pair in element.split(";"):
                name, sep, param = pair.partition("=")
                if sep and name.strip().lower() == "for":
                    found = param
            entries.append(found)
    return entries


def client_address(
    peer: str,
    header_values: Sequence[str],
    *,
    trusted: Sequence[Network],
    header: str = X_FORWARDED_FOR,
) -> str:
    """The address to key the request's bucket by.

    ``peer``: the TCP peer's address; ``header_values``: every value of the forwarding header
    ``header`` in the order received (several lines of it are one list, RFC 9110 5.3)."""
    peer_address = _address(peer)
    if peer_address is None or not trusted or not _trusted(peer_address, trusted):
        return peer
    entries = _forwarded_entries(header_values) if header == FORWARDED else _xff_entries(header_values)
    client: Address = peer_address
    for entry in reversed(entries[-_MAX_HOPS:]):
        address = _address(entry)
        if address is None:
            break  # not an address: the trusted hop that wrote it stands for the client
        client = address
        if not _trusted(address, trusted):
            break
    return str(client)
