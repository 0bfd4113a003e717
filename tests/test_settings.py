"""Settings are read in one place (src/dtrain/settings.py): every DTRAIN_* name the code reads is in its
table, nothing else reads one from the environment, and bad values are configuration errors."""
import re
from pathlib import Path

import pytest

from dtrain.errors import ConfigError
from dtrain.settings import VARS, Settings

SRC = Path(__file__).resolve().parents[1] / "src" / "dtrain"
_READ = re.compile(r"""(?:environ|getenv|env)(?:\.get)?\(\s*["'](DTRAIN_[A-Z_]+)|environ\[\s*["'](DTRAIN_[A-Z_]+)""")


def test_no_module_but_settings_reads_a_dtrain_variable():
    readers = {}
    for path in SRC.rglob("*.py"):
        if path.name == "settings.py" and path.parent == SRC:
            continue
        for m in _READ.finditer(path.read_text()):
            readers.setdefault(path.relative_to(SRC).as_posix(), []).append(m.group(1) or m.group(2))
    # the workspace names keep their own precedence chain (flags > DTRAIN_* > AZURE_* > config.json)
    assert readers == {}, f"read DTRAIN_* through dtrain.settings, not the environment: {readers}"


def test_every_dtrain_name_in_the_code_is_in_the_table():
    named = set()
    for path in SRC.rglob("*.py"):
        named |= set(re.findall(r"\bDTRAIN_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    assert named - set(VARS) == set()


def test_defaults_types_and_errors(tmp_path):
    s = Settings({})
    assert s.number("DTRAIN_AZURE_POLL_CAP_S") == 10.0 and s.local_grace_s == 5.0
    assert s.code_limit_bytes == 1024 * 1024 * 1024
    assert Settings({"DTRAIN_HOME": str(tmp_path)}).home == tmp_path
    assert Settings({"DTRAIN_AZURE_RETRIES": ""}).number("DTRAIN_AZURE_RETRIES") == 5   # empty = unset
    with pytest.raises(ConfigError, match="DTRAIN_AZURE_POLL_CAP_S must be a number, not 'soon'"):
        Settings({"DTRAIN_AZURE_POLL_CAP_S": "soon"}).number("DTRAIN_AZURE_POLL_CAP_S")
    with pytest.raises(ConfigError, match="positive whole number"):
        _ = Settings({"DTRAIN_CODE_LIMIT_MB": "-3"}).code_limit_bytes
    assert Settings({"DTRAIN_LOCAL_GRACE_S": "x"}).local_grace_s == 5.0   # a running job must still stop
    with pytest.raises(KeyError):
        Settings({}).text("DTRAIN_NOT_A_SETTING")
