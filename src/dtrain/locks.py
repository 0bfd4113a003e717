"""Serializing what two dtrain processes on this machine must not do at once: submitting a job name (two
concurrent `submit --name X` would each send the job PUT; Azure treats the later ones as updates, but
"submitted once" should not depend on that) and advancing a retry chain (three followers would each
cancel attempt 1 and submit attempt 2). A lock file per name under $DTRAIN_HOME/locks, held with
flock(2) for the length of the step; the next holder then finds the job that exists and follows it.
Two machines are not serialized (docs/retries.md says what they can still do)."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

from .backends.names import valid_job_name


@contextlib.contextmanager
def name_lock(kind: str, name: str | None) -> Iterator[None]:
    """Hold the lock of (kind, name) on this machine; a no-op for a name not yet chosen or where locks
    cannot be taken (no flock, a read-only home): the backends' own look-up-first still holds there."""
    if not name or not valid_job_name(name):
        yield
        return
    try:
        import fcntl

        from .settings import current

        folder = current().home / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"{kind}-{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)              # closing releases the lock
