"""A host name that does not resolve: retrying cannot help, so nothing retries it.

azure-storage retries a failed connection 3 times with 15 s, 18 s and more between tries (about 85 s
for a datastore upload to a storage account whose name does not resolve), whatever DTRAIN_AZURE_RETRIES
says: the SDK builds its storage clients itself. sdk.no_retry_on_unresolved_names() stops azure-core's
and azure-storage's retries for such a failure; this module only says what one is (no SDK import).

Only a definitive answer counts: EAI_NONAME/EAI_NODATA (NXDOMAIN, no such host), or any lookup failure
of a name under `.invalid` (RFC 6761: never resolves). A temporary resolver failure (EAI_AGAIN) is
still retried.
"""
from __future__ import annotations

import re
import socket

_DEFINITIVE = {getattr(socket, n) for n in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, n)}
_HOST = re.compile(r"Failed to resolve '([^'\s]+)'|host='([^'\s]+)'")


def _linked(exc: BaseException) -> list[BaseException]:
    """exc and every exception it wraps (azure-core's inner_exception, urllib3's reason, requests' args,
    __cause__ and __context__), breadth first, at most 16."""
    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo and len(seen) < 16:
        e = todo.pop(0)
        if not isinstance(e, BaseException) or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [getattr(e, "inner_exception", None), getattr(e, "reason", None), e.__cause__, e.__context__]
        todo += [a for a in e.args[:1] if isinstance(a, BaseException)]
    return seen


def _host_in(chain: list[BaseException]) -> str | None:
    for e in chain:
        host = getattr(getattr(e, "conn", None), "host", None)
        if isinstance(host, str) and host:
            return host
    for e in chain:
        m = _HOST.search(str(e))
        if m:
            return m.group(1) or m.group(2)
    return None


def unresolved_host(exc: BaseException | None) -> str | None:
    """The host name exc failed to resolve, for good (see the module's docstring); None when exc is
    something else. "" when the name is known not to resolve but could not be read from the error."""
    if exc is None:
        return None
    chain = _linked(exc)
    lookups = [e for e in chain if isinstance(e, socket.gaierror)]
    if not lookups:
        return None
    host = _host_in(chain)
    definitive = any(e.errno in _DEFINITIVE for e in lookups)
    if definitive or (host and host.rstrip(".").lower().endswith(".invalid")):
        return host or ""
    return None
