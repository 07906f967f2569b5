"""The HTTP provider's request, pure: allowed hosts, the request, each redirect hop. Hosts
compare as on the wire (IDNA, lower case, no trailing dot, IPv6 compressed in brackets):
``127.1`` is not ``127.0.0.1``. A wildcard never matches an IP.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from .._exceptions import HttpFetchError, InvalidType, InvalidValue
from . import _decode
from ._redact import MIN_SECRET, query_secrets

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["Host", "Origin", "after_redirect", "check_headers", "check_method", "check_url",
           "default_name", "encode_body", "is_address", "origin", "parse_hosts",
           "redirect_target", "target_problem", "url_host", "url_port", "url_secrets",
           "wire_headers", "wire_host"]

# Matched whole (fullmatch): a "$" would also accept a trailing line break.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
# What httpx can send as a header value (else it fails mid-request, quoting the value).
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
#: Headers that describe a body; they go when a redirect drops the body.
_BODY_HEADERS = frozenset({"content-type", "content-length"})

#: ``(scheme, host, port)`` as the host check sees them.
Origin = tuple[str, str, int]

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
        with contextlib.suppress(ValueError):  # not an address: kept, and matches nothing else
            host = ipaddress.IPv6Address(host).compressed
        return f"[{host}]"
    return host


def url_host(url: httpx.URL) -> str:
    """The host httpx will connect to: the ASCII (IDNA) bytes, never a decoded form."""
    return wire_host(url.raw_host.decode("ascii", "replace"))


def url_port(url: httpx.URL) -> int:
    """The port the request goes to (the scheme's default when the URL names none)."""
    return url.port or DEFAULT_PORTS.get(url.scheme, 0)


def is_address(host: str) -> bool:
    """Whether a wire host is (or ``getaddrinfo`` would read it as) an IP address: IPv6, or a
    numeric last label, as every form ``inet_aton`` reads (``127.1``, ``0x7f.1``) has."""
    return host.startswith("[") or bool(_NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]))


class Host(NamedTuple):
    """One ``allowed_hosts`` entry."""

    host: str
    port: int | None
    wildcard: bool

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
        if (m := _HOST_ENTRY.match(entry.strip())) is None:
            raise InvalidValue(bad)
        host = m["host"]
        wildcard = bool(m["wild"])
        try:
            if host.startswith("["):
                host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
            elif not host.isascii():  # the IDNA form httpx puts on the wire
                host = httpx.URL(f"http://{host}/").raw_host.decode("ascii")
        except Exception:
            raise InvalidValue(bad) from None
        if not host.startswith("["):
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


def default_name(url: str | httpx.URL) -> str:
    """An ``HttpContextProvider``'s default name: ``host[:port]/path`` (a default port left
    out, no trailing slash); never the scheme, user info, query or fragment."""
    import httpx

    parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    if not parsed.raw_host:
        return "http"  # not an absolute URL: the provider refuses it anyway
    port = f":{parsed.port}" if parsed.port else ""
    path = parsed.raw_path.split(b"?", 1)[0].decode("ascii", "replace").rstrip("/")
    return f"{url_host(parsed)}{port}{path}" or "http"


def target_problem(url: httpx.URL) -> str | None:
    """Why ``url`` cannot be requested at all, or ``None``."""
    if url.scheme not in ("http", "https"):
        return f"a {url.scheme!r} URL (only http and https)"
    if not url.raw_host:
        return "a URL without a host"
    return None


def check_url(url: object) -> httpx.URL:
    """``url`` parsed: an http(s) URL with a host, else InvalidType or InvalidValue."""
    import httpx

    if not isinstance(url, (str, httpx.URL)):
        raise InvalidType(f"url must be a str, got {type(url).__name__}")
    try:
        parsed = httpx.URL(url)
    except Exception:
        raise InvalidValue("url is not a valid URL") from None
    if (problem := target_problem(parsed)) is not None:
        raise InvalidValue(f"url must be an http or https URL with a host, got {problem}")
    return parsed


def url_secrets(url: httpx.URL) -> list[str]:
    """The URL's password (or a user name alone: a token) and its query values."""
    found: list[str] = []
    if url.userinfo:
        # As written (as httpx logs it) and decoded; a user name alone is a token.
        user, _, password = url.userinfo.decode("ascii", "replace").partition(":")
        pair = (password, url.password) if password else (user, url.username)
        found += [secret for secret in pair if len(secret) >= MIN_SECRET]
    return found + query_secrets(url.query.decode("ascii", "replace"))


def check_method(method: object) -> str:
    """An HTTP method name, upper-cased."""
    if not isinstance(method, str) or not _TOKEN.fullmatch(method):
        raise InvalidValue(f"method must be an HTTP method name such as 'GET', got {method!r}")
    return method.upper()


def check_headers(headers: object) -> tuple[dict[str, str], list[str]]:
    """The headers as a dict, and the secrets in their values (whole and word by word)."""
    if headers is None:
        return {}, []
    if not isinstance(headers, Mapping):
        raise InvalidType(f"headers must be a mapping of str to str, got {type(headers).__name__}")
    out: dict[str, str] = {}
    found: list[str] = []
    for key, value in headers.items():
        if not isinstance(key, str) or not _TOKEN.fullmatch(key):
            raise InvalidValue(f"headers: {key!r} is not a valid header name")
        # Values are secrets: say what is wrong, never what they are.
        if not isinstance(value, str):
            raise InvalidType(f"headers[{key!r}] must be a str, got {type(value).__name__}")
        if not _HEADER_VALUE.fullmatch(value):
            raise InvalidValue(f"headers[{key!r}] must be printable ASCII: no line breaks, "
                             f"control or non-ASCII characters")
        out[key] = value
        # "Bearer abc...": the token alone is as secret as the whole value
        found += [p for p in (value.strip(), *value.split()) if len(p) >= MIN_SECRET]
    return out, found


def encode_body(body: object, headers: Mapping[str, str]) -> tuple[bytes | None, dict[str, str]]:
    """The body's bytes, and the headers with a JSON content type for a JSON body."""
    if body is None or isinstance(body, (str, bytes)):
        return body.encode("utf-8") if isinstance(body, str) else body, dict(headers)
    if isinstance(body, (Mapping, list)):
        try:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise InvalidType(f"body could not be sent as JSON: {exc}") from None
        if any(k.lower() == "content-type" for k in headers):
            return data, dict(headers)
        return data, {**headers, "Content-Type": "application/json"}
    raise InvalidType(f"body must be a str, bytes, dict, list or None, got {type(body).__name__}")


def wire_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` asking for only the encodings decoded here (unless the caller set one)."""
    if any(k.lower() == "accept-encoding" for k in headers):
        return dict(headers)
    return {**headers, "Accept-Encoding": _decode.ACCEPT_ENCODING}


def origin(url: httpx.URL) -> Origin:
    """``(scheme, host, port)`` of ``url``, the host as it goes on the wire."""
    return url.scheme, url_host(url), url_port(url)


def redirect_target(url: httpx.URL, location: str) -> httpx.URL:
    """Where a redirect to ``location`` goes; HttpFetchError if nowhere allowed."""
    try:
        nxt = url.join(location)
    except Exception:
        raise HttpFetchError("refused: redirect to an invalid URL") from None
    if (problem := target_problem(nxt)) is not None:
        raise HttpFetchError(f"refused: redirect to {problem}")
    return nxt


def after_redirect(status: int, method: str, content: bytes | None, headers: Mapping[str, str],
                   first: Origin, nxt: Origin) -> tuple[str, bytes | None, dict[str, str]]:
    """The next hop's method, body and headers: 303, and 301/302 after a POST, become GET
    (HEAD stays) without the body; another origin than ``first`` gets no caller's headers."""
    out = dict(headers)
    if status == 303 or (status in (301, 302) and method == "POST"):
        method = "GET" if method != "HEAD" else method
        content = None
        out = {k: v for k, v in out.items() if k.lower() not in _BODY_HEADERS}
    if nxt != first:
        out = {}
    return method, content, out
