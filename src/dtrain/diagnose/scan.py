"""Reading every rank's log for the causes in causes.py, one line at a time.

Each rank's lines come from an iterator and are looked at once: what a rank keeps is bounded (the first
line of each cause, its first traceback's start, last frame and exception, the highest collective
sequence number, its last line), so memory stays flat whatever the logs' size. The ranks' findings are
then put together: one Cause per kind, with every rank it concerns.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ..backends.base import RankLog
from ..backends.safefile import lines_of
from .causes import BY_KIND, FROM_LOGS, HINTS, ORDER, RANK_PREFIX, Cause
from .job import JobFacts, job_causes, nccl_socket

MAX_EVIDENCE = 4            # lines quoted per cause
MAX_TEXT = 300              # characters quoted per line
_ANY = re.compile("|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', p.pattern)})"
                           for c in FROM_LOGS for p in c.patterns))
_SEQ = re.compile(r"SeqNum=(\d+)|last enqueued NCCL work: (\d+)")
_TB = "Traceback (most recent call last):"
_HVD_RANK = re.compile(r"^(\d+): \[")
_SIGKILL = (137, -9)


@dataclass
class _Hit:
    line: int
    text: str
    groups: dict


@dataclass
class _Rank:
    """What one rank's log showed."""

    log: RankLog
    hits: dict = field(default_factory=dict)       # kind -> first _Hit
    seq: int | None = None                         # highest collective sequence number seen
    named: set = field(default_factory=set)        # ranks this log names as lagging (Horovod, monitoredBarrier)
    tb: list | None = None                         # first traceback: [start _Hit, last frame _Hit, exception _Hit]
    last: _Hit | None = None
    _tb_open: list | None = None
    _hvd: bool = False                             # inside Horovod's "Missing ranks:" list

    def feed(self, n: int, raw: str) -> None:
        text = RANK_PREFIX.sub("", raw, count=1)
        self.last = _Hit(n, raw[:MAX_TEXT], {})
        if self._tb_open is not None or (self.tb is None and text.startswith(_TB)):
            self._traceback(n, text)
        if self._hvd:
            self._horovod(text)
        elif text.startswith("Missing ranks:"):
            self._hvd = True
        if _ANY.search(text):
            self._match(n, text, raw)

    def _match(self, n: int, text: str, raw: str) -> None:
        for cause in FROM_LOGS:
            for p in cause.patterns:
                m = p.search(text)
                if m is None:
                    continue
                if cause.kind not in self.hits:
                    self.hits[cause.kind] = _Hit(n, raw[:MAX_TEXT], {k: v for k, v in m.groupdict().items() if v})
                if m.groupdict().get("lag"):
                    self.named.add(int(m.group("lag")))
                break
        for m in _SEQ.finditer(text):
            s = int(m.group(1) or m.group(2))
            self.seq = s if self.seq is None else max(self.seq, s)

    def _horovod(self, text: str) -> None:
        m = _HVD_RANK.match(text.strip())
        if m:
            self.named.add(int(m.group(1)))
        else:
            self._hvd = False

    def _traceback(self, n: int, text: str) -> None:
        hit = _Hit(n, text[:MAX_TEXT], {})
        if self._tb_open is None:
            self._tb_open = [hit, hit]
        elif text.strip().startswith("File "):
            self._tb_open[1] = hit
        elif text.strip() and not text[:1].isspace():
            self.tb, self._tb_open = [*self._tb_open, hit], None

    @property
    def killed(self) -> bool:
        return (self.log.exit_code in _SIGKILL or self.log.signal == "SIGKILL") and self.tb is None


def scan(logs: Iterable[RankLog]) -> list:
    """Read each rank's lines once; what each rank showed, in rank order."""
    ranks = []
    for log in logs:
        r = _Rank(log)
        for n, text in enumerate(log.lines, 1):
            r.feed(n, text)
        ranks.append(r)
    return ranks


def diagnose(logs: Iterable[RankLog], first_rank: int | None = None, job: JobFacts | None = None) -> list:
    """Every cause the logs (and the job's status, where known) show, the one a failure most likely started
    from first. first_rank: the rank that failed first, where the backend knows it (the Python-exception
    fallback starts there); job: the job's status, message, nodes and VM size (diagnose/job.py)."""
    ranks = scan(logs)
    job = job or JobFacts()
    causes = job_causes(job)
    causes += [c for c in (_combine(kind, ranks) for kind in BY_KIND if BY_KIND[kind].source == "log"
                           and kind != "python_error" and kind not in HINTS) if c]
    explained = {r for c in causes for r in c.ranks} | {r.log.rank for r in ranks if set(r.hits) - set(HINTS)}
    fallback = _python_error(ranks, explained, first_rank)
    if fallback:
        causes.append(fallback)
    found = [r for r in ranks if "nccl_socket" in r.hits]
    hint = nccl_socket(job, *_where(found), _evidence((r, r.hits["nccl_socket"]) for r in found)) if found else None
    if hint:
        causes.append(hint)
    return sorted(causes, key=lambda c: ORDER[c.kind])


def _where(ranks: list) -> tuple[list, list]:
    return (sorted({r.log.rank for r in ranks if r.log.rank is not None}),
            sorted({r.log.node for r in ranks if r.log.node is not None}))


def _evidence(pairs) -> list:
    return [(r.log.source, h.line, h.text) for r, h in pairs][:MAX_EVIDENCE]


def _combine(kind: str, ranks: list) -> Cause | None:
    if kind == "killed":
        return _killed(ranks)
    if kind == "collective_timeout":
        return _collective(ranks)
    found = [r for r in ranks if kind in r.hits]
    if not found:
        return None
    hits = [r.hits[kind] for r in found]
    rank_ids, nodes = _where(found)
    summary = _SUMMARY.get(kind, _plain)(kind, found, hits, ranks)
    if kind == "rendezvous":
        rank_ids, nodes = _where([r for r in ranks if r.log.rank in _not_joined(found, ranks)] or found)
    return Cause(kind, rank_ids, nodes, _evidence(zip(found, hits)), BY_KIND[kind].hint, summary)


def _ids(ranks) -> str:
    ids = sorted(ranks)
    return ("rank " if len(ids) == 1 else "ranks ") + ", ".join(str(i) for i in ids)


def _plain(kind: str, found: list, hits: list, ranks: list) -> str:
    return f"{BY_KIND[kind].title} on {_ids(_where(found)[0])}"


def _details(key: str, hits: list) -> list:
    return sorted({h.groups[key] for h in hits if key in h.groups})


def _oom(kind: str, found: list, hits: list, ranks: list) -> str:
    sizes, shapes = _details("size", hits), _details("shape", hits)
    return _plain(kind, found, hits, ranks) + (f" (tried to allocate {', '.join(sizes)})" if sizes else
                                               f" (a tensor of shape {', '.join(shapes)})" if shapes else "")


def _module(kind: str, found: list, hits: list, ranks: list) -> str:
    names = _details("module", hits) or _details("name", hits)
    what = ", ".join(f"'{n}'" for n in names) or "a module"
    return f"{what} cannot be imported in the job's environment ({_ids(_where(found)[0])})"


def _space(kind: str, found: list, hits: list, ranks: list) -> str:
    paths = _details("path", hits)
    return _plain(kind, found, hits, ranks) + (f", writing {', '.join(paths)}" if paths else "")


def _not_joined(found: list, ranks: list) -> list:
    """The ranks that did not report the start-up failure, where some did: the ones the others waited for."""
    reported = {r.log.rank for r in found}
    return sorted(r.log.rank for r in ranks if r.log.rank is not None and r.log.rank not in reported)


def _rendezvous(kind: str, found: list, hits: list, ranks: list) -> str:
    missing = _not_joined(found, ranks)
    joined = _details("joined", hits)
    s = f"start-up failed on {_ids(_where(found)[0])}"
    s += f"; {_ids(missing)} never joined" if missing else ""
    return s + (f" ({joined[0]} clients joined)" if joined else "")


_SUMMARY = {"gpu_oom": _oom, "missing_module": _module, "no_space": _space, "rendezvous": _rendezvous}


_NO = _Hit(0, "", {})


def _said(ranks: list, key: str) -> set:
    """What mpirun's killed lines say (the rank, the host)."""
    return {r.hits["killed"].groups[key] for r in ranks if key in r.hits.get("killed", _NO).groups}


def _killed(ranks: list) -> Cause | None:
    """SIGKILL with no traceback (the exit code the backend saw), or mpirun saying so of a rank."""
    found = [r for r in ranks if r.killed or "killed" in r.hits]
    if not found:
        return None
    ids = {int(i) for i in _said(ranks, "rank")}
    found = [r for r in ranks if r.log.rank in ids] or found
    pairs = [(r, r.hits["killed"]) for r in ranks if "killed" in r.hits]
    pairs += [(r, r.last or _Hit(0, f"exit code {r.log.exit_code} (SIGKILL)", {})) for r in found if r.killed]
    rank_ids, nodes = _where(found)
    where = [str(n) for n in nodes] or sorted(_said(ranks, "host"))
    on = f" on node {', '.join(where)}" if where else ""
    return Cause("killed", rank_ids or sorted(ids), nodes, _evidence(pairs), BY_KIND["killed"].hint,
                 f"{_ids(rank_ids or ids)} killed by SIGKILL with no traceback{on}: most likely out of host memory")


def _lagging(found: list, ranks: list) -> tuple[list, int | None]:
    """The ranks the others waited for: named by a log (Horovod, monitoredBarrier); else those whose
    highest collective sequence number is behind the others'; else those that reported no timeout."""
    named = set().union(*(r.named for r in ranks))
    if named:
        return sorted(named), None
    seqs = [r.seq for r in ranks if r.seq is not None]
    if seqs:
        top = max(seqs)
        return sorted(r.log.rank for r in ranks if r.log.rank is not None and (r.seq or -1) < top), top
    return _not_joined(found, ranks), None


def _collective(ranks: list) -> Cause | None:
    found = [r for r in ranks if "collective_timeout" in r.hits]
    if not found:
        return None
    hits = [r.hits["collective_timeout"] for r in found]
    lagging, top = _lagging(found, ranks)
    ops = _details("op", hits)
    what = (ops[0] if ops else "a collective") + (f" (SeqNum {top})" if top is not None else "")
    behind = [f"rank {r.log.rank} " + (f"at SeqNum {r.seq}" if r.seq is not None else "never reached it")
              for r in ranks if r.log.rank in lagging and top is not None]
    summary = f"{what} timed out on {_ids(_where(found)[0])}; " + (
        f"lagging: {_ids(lagging)}" + (f" ({', '.join(behind)})" if behind else "") if lagging
        else "no rank lagged by its logs (all waited at the same collective)")
    target = [r for r in ranks if r.log.rank in lagging] or found
    rank_ids, nodes = _where(target)
    return Cause("collective_timeout", rank_ids, nodes, _evidence(zip(found, hits)),
                 BY_KIND["collective_timeout"].hint, summary)


def _python_error(ranks: list, explained: set, first_rank: int | None) -> Cause | None:
    """The first traceback, where no other cause explains its rank: the failed-first rank's, else the
    lowest failed rank's, else the lowest rank's."""
    left = [r for r in ranks if r.tb is not None and r.log.rank not in explained]
    if not left:
        return None
    r = min(left, key=lambda r: (r.log.rank != first_rank, not r.log.exit_code, r.log.rank or 0))
    start, frame, exc = r.tb
    rank_ids, nodes = _where([r])
    who = f"rank {r.log.rank}" if r.log.rank is not None else r.log.source
    return Cause("python_error", rank_ids, nodes, _evidence([(r, frame), (r, exc)]), BY_KIND["python_error"].hint,
                 f"{who} raised {exc.text.strip()} at {frame.text.strip()}")


# --- folders of logs --------------------------------------------------------------------------------
_LOG_NAME = re.compile(r"std_log_process_(\d+)(?:_\w+)?\.txt$")


def job_folder_logs(job_dir: Path) -> Iterator[RankLog]:
    """A local job folder's rank logs (plan.json's ranks), with state.json's exit code of each process."""
    plan = _json(job_dir / "plan.json")
    state = _json(job_dir / "state.json")
    procs = {p.get("rank"): p for p in state.get("processes") or [] if isinstance(p, dict)}
    for r in plan.get("ranks") or []:
        p = procs.get(r.get("rank")) or {}
        yield RankLog(rank=r.get("rank"), node=r.get("node"), source=r["log"], lines=_lines(job_dir / r["log"]),
                      exit_code=p.get("exit_code"), signal=p.get("signal"))


def folder_logs(folder: Path) -> list:
    """The rank logs under a folder: a local job folder, or what `az ml job download` leaves
    (user_logs/std_log_process_N.txt, std_log_process_NN_ps.txt, ...), found at any depth."""
    folder = Path(folder)
    if (folder / "plan.json").is_file() and (folder / "state.json").is_file():
        return list(job_folder_logs(folder))
    found = []
    for p in sorted(folder.rglob("std_log_process_*.txt")):
        m = _LOG_NAME.search(p.name)
        if m:
            found.append(RankLog(rank=int(m.group(1)), node=None, source=str(p.relative_to(folder)),
                                 lines=_lines(p)))
    return sorted(found, key=lambda log: (log.rank, log.source))


def _lines(path: Path) -> Iterator[str]:
    try:
        yield from lines_of(path)
    except FileNotFoundError:
        return
    except OSError:                   # not a regular file (a FIFO, a symlink): never read
        return


def _json(path: Path) -> dict:
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}
