"""Which keys look like they hold a secret, so that no message, hint or echoed source line shows the value."""
from __future__ import annotations

import re

_SECRETY = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|CONN(ECTION)?_?STR)", re.I)


def looks_secret(key: str) -> bool:
    return bool(_SECRETY.search(key))
