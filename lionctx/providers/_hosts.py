"""Which hosts and ports an ``HttpContextProvider`` may request (``allowed_hosts``).

Hosts compare as on the wire (IDNA, lower case, no trailing dot, IPv6 compressed in
brackets): another spelling of an address (``127.1``) is another host. An entry with a
port allows that port only; without one, the scheme's default port and, for the host of
the provider's ``url``, that URL's port. A wildcard (``*.example.com``) matches names
below the domain, never an IP address, and a wildcard over an address is refused.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._exceptions import InvalidType, InvalidValue

if TYPE_CHECKING:  # pragma: no cover
    import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}

_HOST_ENTRY = re.compile(r"^(?P<wild>\*\.)?(?P<host>\[[^\]]+\]|[^\[\]:/@\s]+)"
                         r"(?::(?P<port>\d{1,5}))?$")
_WIRE_NAME = re.compile(r"^[a-z0-9_](?:[a-z0-9._-]*[a-z0-9_])?$")
# A label inet_aton would read as a number: decimal, octal or hex.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")


def wire_host(raw: str) -> str:
    """A host as compared: lower case, no trailing dot, IPv6 in canonical brackets."""
    host = raw.lower().rstrip(".")
    if ":" in host:  # an IPv6 literal (httpx gives it without brackets)
        try:
            host = ipaddress.IPv6Address(host).compressed
        except ValueError:
            pass  # not an address: it stays as written, and matches nothing else
        return f"[{host}]"
    return host


def url_host(url: httpx.URL) -> str:
    """The host httpx will connect to: the ASCII (IDNA) bytes, never a decoded form."""
    return wire_host(url.raw_host.decode("ascii", "replace"))


def url_port(url: httpx.URL) -> int:
    """The port the request goes to (the scheme's default when the URL names none)."""
    return url.port or DEFAULT_PORTS.get(url.scheme, 0)


def is_address(host: str) -> bool:
    """Whether a wire host is (or ``getaddrinfo`` would read it as) an IP address."""
    if host.startswith("["):
        return True
    try:
        socket.inet_aton(host)
        return True
    except (OSError, ValueError):
        pass
    return bool(_NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]))


class Host:
    """One ``allowed_hosts`` entry."""

    __slots__ = ("host", "port", "wildcard")

    def __init__(self, host: str, port: int | None, wildcard: bool) -> None:
        self.host, self.port, self.wildcard = host, port, wildcard

    def allows(self, host: str, port: int, scheme: str, home: tuple[str, int]) -> bool:
        """Whether ``host:port`` over ``scheme`` is allowed (``home``: the provider's own)."""
        if self.wildcard:
            # A suffix match on an address would let "*.0.0.1" reach 10.0.0.1.
            if is_address(host) or not host.endswith("." + self.host):
                return False
        elif host != self.host:
            return False
        if self.port is not None:
            return port == self.port
        return port == DEFAULT_PORTS.get(scheme) or (host, port) == home

    def __repr__(self) -> str:
        star = "*." if self.wildcard else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{star}{self.host}{port}"


def parse_hosts(value: Any) -> list[Host]:
    """``allowed_hosts`` as given, checked; an InvalidType/InvalidValue names the entry."""
    import httpx

    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidType(f"allowed_hosts must be a list of host names, got {value!r}")
    hosts: list[Host] = []
    for entry in value:
        if not isinstance(entry, str):
            raise InvalidType(f"allowed_hosts entries must be str, got {entry!r}")
        bad = (f"allowed_hosts entry {entry!r} is not a host name, 'host:port', "
               f"'*.domain' or '[ipv6]'")
        m = _HOST_ENTRY.match(entry.strip())
        if m is None:
            raise InvalidValue(bad)
        host = m["host"]
        wildcard = bool(m["wild"])
        if host.startswith("["):
            try:
                host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
            except ValueError:
                raise InvalidValue(bad) from None
        else:
            if not host.isascii():
                try:  # the IDNA form httpx puts on the wire
                    host = httpx.URL(f"http://{host}/").raw_host.decode("ascii")
                except Exception:
                    raise InvalidValue(bad) from None
            host = wire_host(host)
            if not _WIRE_NAME.match(host):
                raise InvalidValue(bad)
        if wildcard and is_address(host):
            raise InvalidValue(f"allowed_hosts entry {entry!r}: a wildcard matches host names "
                             f"below a domain, never IP addresses; list each address")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise InvalidValue(f"allowed_hosts entry {entry!r} has an invalid port")
        hosts.append(Host(host, port, wildcard))
    if not hosts:
        raise InvalidValue("allowed_hosts must name at least one host")
    return hosts
