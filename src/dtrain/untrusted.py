"""Text dtrain did not write (a job's log lines, the service's and the SDK's messages, metric names,
config values) made safe for where it goes: secrets redacted, terminal control shown instead of obeyed,
CI runner commands neutralized. Pure functions and one in-memory registry; no I/O at import.

Where the text goes decides what is done to it (docs/monitoring.md, Untrusted text):

| destination | service / SDK text | a job's own log lines |
|---|---|---|
| terminal | redacted, controls escaped (`^[`, `^M`) | redacted, controls escaped |
| pipe or file | redacted | byte-exact |
| CI log (GITHUB_ACTIONS / TF_BUILD) | redacted, runner commands neutralized | redacted, runner commands neutralized |

The job's own log files (the local backend's, or what `logs` writes to a pipe outside CI) are never
changed."""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import traceback
import unicodedata
from collections.abc import Callable, Iterator, Mapping

MASK = "***"
MIN_SECRET_LEN = 8   # shorter values would mask ordinary words ("true", a job name)

# --- redaction -----------------------------------------------------------------------------------

_secrets: set[str] = set()
_secrets_sorted: list[str] = []
_lock = threading.Lock()


def remember_secret(value: str | None) -> None:
    """Register a value that must never be shown (the bearer token in use, a client secret). Values
    shorter than MIN_SECRET_LEN characters are ignored."""
    if not value:
        return
    value = str(value).strip()
    if len(value) < MIN_SECRET_LEN or value in _secrets:
        return
    global _secrets_sorted
    with _lock:
        _secrets.add(value)
        # longest first, so a token that contains another registered value is masked whole
        _secrets_sorted = sorted(_secrets, key=len, reverse=True)


def forget_secrets() -> None:
    """Empty the registry (tests)."""
    global _secrets_sorted
    with _lock:
        _secrets.clear()
        _secrets_sorted = []


# Key names whose value is a secret, in connection strings (`AccountKey=...;`), query strings, JSON
# (`"client_secret": "..."`) and form bodies. The name stays so the message stays readable.
_SECRET_KEYS = (r"AccountKey|SharedAccessKey|SharedAccessSignature|AccessKey|Password|Pwd|"
                r"client_secret|ClientSecret|client_assertion|access_token|refresh_token|id_token|"
                r"system_access_token|api[_-]?key")
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization: Bearer <token> (also "bearer" in lower case, as GitHub's OIDC request sends it)
    # (not the parameters of a WWW-Authenticate challenge: `Bearer authorization_uri="..."`)
    (re.compile(r"(?i)(\bbearer\s+)(?![\w-]+=\")[A-Za-z0-9\-._~+/]+=*"), rf"\1{MASK}"),
    # SharedAccessSignature sr=...&sig=... (Service Bus / Event Hubs header form) and SAS URLs' sig=
    # (URL-encoded too: `%26sig%3D...%26`, the value itself holding %2B and %3D)
    (re.compile(r"(?i)((?<![a-z])sig(?:=|%3D))(?:(?!%26)[^&\s\"'<>;,])+"), rf"\1{MASK}"),
    (re.compile(rf"(?i)((?<![a-z])(?:{_SECRET_KEYS})[\"']?\s*(?:=|:|%3D)\s*[\"']?)[^\s;&\"'<>,]+"), rf"\1{MASK}"),
    # a JWT anywhere (eyJ... header . payload . signature), e.g. an ID token in an AADSTS message
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),
]
# a cheap test first: most text holds none of these words, and then no pattern runs. Substring tests on
# the lower-cased text: a case-insensitive regex alternation was ~100x slower (35 s on 116 MB of metrics)
_MAYBE_WORDS = ("bearer", "sig", "eyj", "key", "password", "pwd", "secret", "assertion", "token")


def _maybe(text: str) -> bool:
    lower = text.lower()
    return any(w in lower for w in _MAYBE_WORDS)


def redact(text: str) -> str:
    """`text` with every registered secret and every secret-looking value (Bearer tokens, SAS `sig=`,
    connection-string keys, client secrets, JWTs) replaced by `***`, key names kept."""
    if not text:
        return text
    for s in _secrets_sorted:
        if s in text:
            text = text.replace(s, MASK)
    if _maybe(text):
        for pattern, repl in _PATTERNS:
            text = pattern.sub(repl, text)
    return text


def redact_traceback(exc: BaseException) -> str:
    """A formatted traceback of `exc` (with its chained causes), redacted, for --debug."""
    return redact("".join(traceback.format_exception(exc)))


# --- terminal ------------------------------------------------------------------------------------

# bidirectional overrides and isolates reorder what is shown ("Trojan Source"); shown as <U+XXXX>
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _visible(ch: str) -> str:
    """One character as `cat -v` shows it; printable characters and tab/newline as they are."""
    o = ord(ch)
    if o < 0x20:
        return ch if ch in "\t\n" else "^" + chr(o + 0x40)
    if o == 0x7F:
        return "^?"
    if 0x80 <= o < 0xA0:          # C1 controls (CSI 0x9b, OSC 0x9d act like ESC [ and ESC ])
        return "M-^" + chr(o - 0x80 + 0x40)
    if ch in _BIDI:
        return f"<U+{o:04X}>"
    return ch


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]")


def for_terminal(text: str) -> str:
    """`text` with every control character shown, as `cat -v` and `less` show it (ESC as `^[`, CR as
    `^M`, C1 as `M-^[`), so no escape sequence (clear screen, window title, OSC 8 link) can act.
    Tab and newline are kept."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: _visible(m.group()), text)


def _cells(piece: str) -> int:
    n = 0
    for ch in piece:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def cut_for_terminal(text: str, width: int, ellipsis: str = "…") -> str:
    """`text` made safe by for_terminal and cut to at most `width` terminal cells, never inside an
    escaped control (a `^[` is kept or dropped whole) nor a wide character; `ellipsis` marks a cut."""
    if width <= 0:
        return ""
    # one line: a tab's width is unknown and a newline would break the row
    pieces = [_visible(ch) for ch in text.replace("\t", " ").replace("\n", " ")]
    if sum(_cells(p) for p in pieces) <= width:
        return "".join(pieces)
    room = width - _cells(ellipsis)
    out, used = [], 0
    for p in pieces:
        w = _cells(p)
        if used + w > room:
            break
        out.append(p)
        used += w
    return "".join(out) + (ellipsis if room >= 0 else "")


_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"      # OSC ... BEL/ST (title, hyperlink)
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"          # DCS, PM, APC, SOS ... ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]"                # CSI (colours, cursor, clear screen)
    r"|\x1b[@-Z\\-_]"                          # two-byte ESC sequences
    r"|\x9b[0-?]*[ -/]*[@-~]|\x9d[^\x07\x9c]*[\x07\x9c]?")


def strip_controls(text: str) -> str:
    """`text` without escape sequences and control characters (tab and newline kept), for files that
    a browser renders (the step summary)."""
    text = _ESCAPE_SEQUENCE.sub("", text)
    return _UNSAFE.sub("", text.replace("\r\n", "\n"))


# --- CI runner commands --------------------------------------------------------------------------

GITHUB, AZURE_PIPELINES = "github", "azure-pipelines"


def ci_kind(env: Mapping[str, str] | None = None) -> str | None:
    """The CI system whose runner reads dtrain's output: GITHUB (GITHUB_ACTIONS=true), AZURE_PIPELINES
    (TF_BUILD=True) or None. The one place dtrain tells."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true":
        return GITHUB
    if env.get("TF_BUILD", "").lower() == "true":
        return AZURE_PIPELINES
    return None


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    return ci_kind(env) is not None


# Azure Pipelines' agent looks for `##vso[` anywhere in a line, case-insensitively; `##[` starts its
# formatting commands (##[error], ##[group]) and GitHub's legacy command form (##[add-mask]).
_VSO = re.compile(r"##(?=vso\[|\[)", re.IGNORECASE)
# GitHub's runner trims the line before it looks for `::command`; like the Azure agent, it reads lines
# with .NET's ReadLine, which ends a line at a bare CR too
_GH_LEADING = re.compile(r"(?:^|(?<=[\r\n]))(\s*)::")


def neutralize_commands(text: str, ci: str | None, *, in_block: bool = False) -> str:
    """`text` (one or more lines) with no runner command left: `##vso[` and `##[` anywhere become
    `#\\#vso[` and `#\\#[`, and in GitHub Actions a `::` that starts a line (after whitespace) becomes
    `\\::`. `in_block`: the text is written inside a GitHub stop-commands block (github_stop_commands),
    where the runner reads no command, so it is left as is."""
    if ci is None or (in_block and ci == GITHUB):
        return text
    text = _VSO.sub(r"#\\#", text)
    if ci == GITHUB:
        text = _GH_LEADING.sub(r"\1\\::", text)
    return text


@contextlib.contextmanager
def github_stop_commands(write_line: Callable[[str], None], ci: str | None) -> Iterator[bool]:
    """Around a run of untrusted lines in GitHub Actions: writes `::stop-commands::<random token>`
    first and `::<token>::` last, so the runner reads no workflow command in between. Yields whether a
    block is open (pass it as `in_block` to safe_line). Elsewhere writes nothing and yields False.
    Write the markers on the stream that carries the lines (the runner reads stdout and stderr
    separately, so their order across streams is not kept), and close the block before dtrain's own
    `::error`."""
    if ci != GITHUB:
        yield False
        return
    token = secrets.token_hex(16)   # unguessable, so the text cannot resume commands itself
    write_line(f"::stop-commands::{token}")
    try:
        yield True
    finally:
        write_line(f"::{token}::")


# --- the one entry point -------------------------------------------------------------------------

def safe_line(text: str, *, tty: bool, ci: str | None, job_output: bool = False, in_block: bool = False) -> str:
    """Untrusted `text` (a line, or several) as it may be written to its destination: a terminal
    (`tty`), a pipe or file, or a CI log (`ci`, from ci_kind()).

    Service and SDK text is always redacted. `job_output`: a job's own log line (`logs`, the `submit
    --wait` stream), which goes to a pipe or file byte-exact outside CI and is treated like service text
    on a terminal or in CI. On a terminal, controls are escaped (for_terminal); in CI, runner commands are
    neutralized (neutralize_commands, `in_block` as there)."""
    if job_output and not tty and ci is None:
        return text
    text = redact(text)
    if tty:
        text = for_terminal(text)
    if ci is not None:
        text = neutralize_commands(text, ci, in_block=in_block)
    return text


class Destination:
    """Where a stream's text lands, read once (isatty is a system call; a log stream has many lines):
    `Destination.of(sys.stdout).safe(line, job_output=True)`."""

    def __init__(self, tty: bool, ci: str | None):
        self.tty, self.ci = tty, ci

    @classmethod
    def of(cls, stream, env: Mapping[str, str] | None = None) -> Destination:
        isatty = getattr(stream, "isatty", None)
        return cls(bool(isatty and isatty()), ci_kind(env))

    def safe(self, text: str, *, job_output: bool = False, in_block: bool = False) -> str:
        return safe_line(text, tty=self.tty, ci=self.ci, job_output=job_output, in_block=in_block)

    def __repr__(self) -> str:
        return f"Destination(tty={self.tty}, ci={self.ci!r})"
