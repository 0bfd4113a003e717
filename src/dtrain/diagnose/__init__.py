"""Why a distributed job failed, from every rank's log: `dtrain why` and the end of a failed wait.

    from dtrain.diagnose import diagnose, folder_logs
    for cause in diagnose(folder_logs("downloaded-logs")):
        print(cause.kind, cause.ranks, cause.summary, cause.hint)

causes.py is the table (what each cause's lines look like, what to change); scan.py reads the logs in
bounded memory and puts the ranks' findings together.
"""
from __future__ import annotations

from ..backends.base import RankLog
from .causes import BY_KIND, CAUSES, Cause, CauseKind
from .job import JobFacts
from .scan import diagnose, folder_logs, job_folder_logs, scan

__all__ = ["BY_KIND", "CAUSES", "Cause", "CauseKind", "JobFacts", "RankLog", "diagnose", "folder_logs",
           "job_folder_logs", "scan"]
