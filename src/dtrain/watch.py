"""`dtrain watch` as a library: many jobs followed by the one follower (follow.py) with one list call
per poll whatever their number (so watching 100 Azure jobs costs what watching one does), and which of
them the exit code is about. It prints nothing: cli/watch_view.py draws the table."""
from __future__ import annotations

from typing import Iterator

from . import follow as fl
from .errors import JobNotFound


class Watch:
    """The jobs named (or, without names, those the experiment/tag filters list), read once at the start.
    judged: the names the exit code is about: named jobs all; without names, only the jobs still active
    when the watch began (a job that ended last week says nothing about this run)."""

    def __init__(self, runner, listing, names, experiment, tags, interval: float, metric: str | None):
        self.runner, self.listing = runner, listing
        self.experiment, self.tags = experiment, tags or None
        self.interval, self.metric = interval, metric
        self.first = self._list(names, limit=None if names else 200)
        self.names = [i.name for i in self.first]
        self.judged = set(names) if names else {i.name for i in self.first if not i.terminal}

    def _list(self, names, limit=None) -> list:
        infos = self.listing.list(experiment=self.experiment, tags=self.tags, limit=limit, names=names)
        if not names:
            return infos
        by = {i.name: i for i in infos}
        missing = [n for n in names if n not in by]
        if missing:
            raise JobNotFound(f"no job named {', '.join(missing)}", hint="`dtrain list` shows job names")
        return [by[n] for n in names]

    def _read(self, _active) -> dict:
        """Every watched job, ended or not: one listing per poll whatever their number."""
        return {i.name: i for i in self._list(self.names)}

    def events(self, once: bool = False) -> Iterator[fl.Event]:
        """StatusChanged per change and a Polled per interval (with each job's latest `metric`), then
        Ended when every job has ended; with once (or nothing to watch), the first reading alone."""
        initial = {i.name: i for i in self.first}
        opts = fl.Options(drive=False, read=self._read, first_poll=self.interval, cap=self.interval,
                          metrics=bool(self.metric), metrics_every=0.0, sysmetrics=bool(self.metric), initial=initial)
        if once or not initial:
            opts.wait = False                 # shown once, then Ended
        return fl.follow(self.runner, list(initial), options=opts)
