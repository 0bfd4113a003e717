"""How the local backend starts its own processes: `python -m dtrain.backends.local.entry watchdog JOB_DIR`
(submit) and `... entry supervisor JOB_DIR WATCHDOG_PID` (the watchdog). The package itself never imports
this module, so running it with -m raises no runpy warning (watchdog.py and supervisor.py are imported by
the package, and `python -m` on them printed "found in sys.modules ... unpredictable behaviour" into every
job's supervisor.txt)."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    which, rest = (argv[0], argv[1:]) if argv else ("", [])
    if which == "watchdog":
        from .watchdog import main as run
    elif which == "supervisor":
        from .supervisor import main as run
    else:                                 # not a user's command: only submit and the watchdog run it
        return 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
