"""How one job is printed by every command: its line (or JSON), why it failed, a chain's attempts."""
from __future__ import annotations

from ..output import err, out, out_json, paint, shown


def info(i, output: str) -> None:
    """One job: `name<TAB>status` (and why it failed) on a terminal, or its JSON."""
    if output == "json":
        out_json(i.to_dict())
        return
    out(f"{i.name}\t{shown(i.status, None)}" + ("\t(timed out)" if i.timed_out else ""))
    failure(i)


def failure(i) -> None:
    f = i.failure
    if not f:
        return
    err(f"{paint('failed', '31')}: {shown((f.message or '').strip())}")
    for line in (f.traceback or f.last_lines)[-20:]:
        err(f"    {shown(line)}")


def web(i) -> None:
    """--web: the job's page opened in a browser, or its address printed where no browser can be opened."""
    from ..browser import open_page

    if not i.url or not str(i.url).startswith(("https://", "http://")):
        err(f"{i.name}: no web page (a local job lives in {shown(i.url or '?')})")
    elif open_page(i.url):
        err(f"{i.name}: opened {shown(i.url)}")
    else:
        err(f"{i.name}: open {shown(i.url)} in a browser (none can be opened here)")


def services(i) -> None:
    """A job's interactive services, one line each on stderr: name, type, endpoint once the service reports one."""
    for name, svc in sorted((i.services or {}).items()):
        where = svc.get("endpoint") or "no endpoint yet"
        state = f" [{svc['status']}]" if svc.get("status") else ""
        err(f"  {shown(name)} ({shown(svc.get('type', '?'))}): {shown(where)}{shown(state)}")


def attempts(i) -> None:
    """A retry chain's attempts, one line each on stderr: name, status, why it ended (docs/retries.md)."""
    from ..chain import attempt_label

    c = i.chain
    if not c:
        return
    for a in c["attempts"]:
        why = f"  {a['outcome']}" + (f": {a['reason']}" if a.get("reason") and a["reason"] != a["status"] else "") \
            if a.get("outcome") else ""
        err(f"  {attempt_label(c, a['attempt'])}  {a['name']}  {a['status']}{shown(why)}")
    if c.get("next"):
        err(f"  {attempt_label(c, c['next']['attempt'])}  {c['next']['name']}  due {c['next']['due_at']} "
            f"(submitted by `dtrain wait {c['name']}`)")
    if c.get("not_retried"):
        err(f"  no attempt {c['attempt'] + 1}: {shown(c['not_retried'])}")
