"""Faults the emulator can inject, scripted per path pattern, method and count."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Dict, Optional, Pattern

# kinds
STATUS = "status"  # answer with an HTTP error status (429, 500, 503, ...)
RESET = "reset"  # close the connection without any response (TCP RST), before processing
RESET_AFTER = "reset_after"  # process the request, then close the connection without answering
SLOW = "slow"  # sleep, then answer normally


@dataclass
class Fault:
    """One scripted fault.

    ``pattern`` is a regular expression searched in the request path (without the query);
    ``method`` limits it to one HTTP method; ``count`` is how many matching requests it hits
    (``None``: every one); ``skip`` lets that many matching requests through first.
    """

    kind: str
    pattern: Pattern[str]
    method: Optional[str] = None
    count: Optional[int] = 1
    skip: int = 0
    status: int = 503
    retry_after: Optional[float] = None
    delay: float = 0.0
    code: Optional[str] = None
    message: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    hits: int = 0
    seen: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, method: str, path: str) -> bool:
        """True (and counts a hit) when this fault applies to the request."""
        if self.method and self.method.upper() != method.upper():
            return False
        if not self.pattern.search(path):
            return False
        with self._lock:
            self.seen += 1
            if self.seen <= self.skip:
                return False
            if self.count is not None and self.hits >= self.count:
                return False
            self.hits += 1
            return True

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count


def compile_pattern(pattern: str) -> Pattern[str]:
    return re.compile(pattern)


@dataclass
class TokenExpiry:
    """Reject ``token`` with 401 once it has been accepted ``after_requests`` times."""

    token: str
    after_requests: int = 0
    challenge: str = "cae"  # "cae": claims challenge the SDK answers by fetching a new token
    accepted: int = 0
    rejected: int = 0
