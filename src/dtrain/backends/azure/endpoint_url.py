"""Checking DTRAIN_ARM_ENDPOINT the way the HTTP stack will read it.

A bearer token goes wherever the HTTP stack (azure-core -> requests -> urllib3) connects. Python's
urllib.parse and urllib3 disagree on some URLs: `http://evil.example.com\\@127.0.0.1` is host
127.0.0.1 to urllib.parse but evil.example.com to urllib3, so a check made with the one and a
connection made by the other would send the token to evil.example.com. So:

1. the URL must have a plain shape (scheme, host, optional port, optional simple path), which rules
   out userinfo, backslashes, percent-escapes, whitespace and control characters, queries and
   fragments: everything the two parsers can read differently;
2. urllib3.util.parse_url (what the stack uses) and urllib.parse.urlsplit must then agree on scheme,
   host and port;
3. "loopback" means exactly `localhost`, a dotted-quad 127.x.y.z in canonical decimal, or `[::1]`.
   Shorthand forms a resolver may also map to 127.0.0.1 (`127.1`, `0x7f.1`, `2130706433`,
   `localhost.`) are not loopback here: a name is loopback only when no resolver is involved.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])"
_PLAIN_URL = re.compile(rf"(?P<scheme>https?)://(?P<host>{_HOST})(?::(?P<port>[0-9]{{1,5}}))?(?P<path>/[A-Za-z0-9._~/-]*)?")
_DOTTED_QUAD = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")


class UnsafeEndpoint(ValueError):
    """The URL is not one whose host every parser reads the same way."""


@dataclass(frozen=True)
class ParsedEndpoint:
    scheme: str
    host: str        # lower case; IPv6 without brackets
    port: int | None
    loopback: bool


def is_loopback_host(host: str | None) -> bool:
    """localhost, a canonical dotted-quad in 127.0.0.0/8, or ::1 (brackets allowed)."""
    if not host:
        return False
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    if _DOTTED_QUAD.fullmatch(host):
        try:
            return ipaddress.IPv4Address(host).is_loopback
        except ValueError:
            return False
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host) == ipaddress.IPv6Address("::1")
        except ValueError:
            return False
    return False


def parse_endpoint(url: str) -> ParsedEndpoint:
    """The endpoint as the HTTP stack will connect to it; UnsafeEndpoint when it is ambiguous."""
    from urllib3.util import parse_url

    m = _PLAIN_URL.fullmatch(url)
    if m is None:
        raise UnsafeEndpoint("only scheme://host[:port][/path] is accepted: no user name or password, "
                             "backslash, percent-escape, whitespace, query or fragment")
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise UnsafeEndpoint(f"port {port} is out of range")
    try:
        stack = parse_url(url)
        strict = urlsplit(url)
        strict_port = strict.port
    except ValueError as exc:
        raise UnsafeEndpoint(str(exc)) from None
    stack_host = (stack.host or "").lower()
    strict_host = (strict.hostname or "").lower()
    if stack_host.startswith("["):
        stack_host = stack_host[1:-1]
    if (stack.scheme, stack_host, stack.port, stack.auth) != (strict.scheme, strict_host, strict_port, None) \
            or strict.username is not None:
        raise UnsafeEndpoint("the URL reads differently to different parsers")
    return ParsedEndpoint(str(stack.scheme), stack_host, stack.port, is_loopback_host(stack_host))
