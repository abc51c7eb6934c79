"""Which network addresses an outbound call may reach: global unicast only, judged on the IPv4 address an IPv6
form embeds. Used by the outbound HTTP guard (routing/http/destinations.py, on every resolved address, before
connecting to one) and by the credential checks (byok/shapes.py, on literal addresses in customer-supplied URLs)."""

import ipaddress
import socket

_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: IPv4 in the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local-use translation: refused outright
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (also :: and ::1)
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 ::ffff:0:a.b.c.d
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated, but routed inside some networks


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, translated, NAT64, 6to4, Teredo)."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped:
        return [ip.ipv4_mapped]
    if ip in _IPV4_COMPATIBLE or ip in _IPV4_TRANSLATED or ip in _NAT64_WELL_KNOWN:
        return [low32]
    if ip.sixtofour:
        return [ip.sixtofour]
    if ip.teredo:
        server, client = ip.teredo  # the client is the inverted last 32 bits
        return [server, client]
    return []


def is_public_address(address: str) -> bool:
    """Whether an outbound call may connect to this address: global unicast only, judged on the IPv4 address
    an IPv6 form embeds (`::ffff:127.0.0.1`, `::127.0.0.1`, `64:ff9b::7f00:1`, `2002:7f00:1::`, Teredo)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL or ip in _SITE_LOCAL or ip.is_multicast:
            return False
        embedded = _embedded_ipv4(ip)
        if embedded:  # the translation and tunnel prefixes are global: the embedded address decides
            return all(_ipv4_public(v4) for v4 in embedded)
        return ip.is_global
    return _ipv4_public(ip)


def _ipv4_public(ip: ipaddress.IPv4Address) -> bool:
    return ip.is_global and not ip.is_multicast and not ip.is_reserved and not ip.is_unspecified


def literal_address(host: str) -> str | None:
    """The address a URL's host names literally, in any spelling a resolver accepts (`127.1`, `0x7f000001`,
    `2130706433`, `[::1]`), or None for a name that needs DNS."""
    host = host.strip("[]").split("%", 1)[0]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))  # the shorthand IPv4 forms inet_aton accepts
    except OSError:
        return None
