"""The emulator against the service's own recorded answers (Azure/azure-sdk-assets, the four recordings in
../shared/conformance/recordings/, upstream paths in its manifest.json): every recorded request is sent to the
emulator, and the status code, the headers a client acts on (Location, the content type, x-ms-error-code) and
the body's shape (its keys, at every depth, and the JSON type of every value the service did not leave null)
must be the recorded ones."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request


from azure_emulator import AzureMLEmulator, fake_jwt
from azure_emulator.wire import BLOB_CONTAINER, Blob

_WS = re.compile(r"^https://[^/]+(/subscriptions/[^/]+/resourceGroups/[^/]+/providers/"
                 r"Microsoft\.MachineLearningServices/workspaces/[^/?]+)")
_BLOB = re.compile(r"^https://[^/.]+\.blob\.core\.windows\.net/([^/]+)/")
_SHAPE_ONLY = ("systemData",)       # who and when: the sanitized recording and the emulator differ by design


def _recordings(conformance_dir):
    manifest = json.loads((conformance_dir / "recordings" / "manifest.json").read_text())
    return {m["file"].split("pyTest", 1)[1].split(".json")[0]: json.loads((conformance_dir / m["file"]).read_text())
            for m in manifest}


def _url(emu, uri: str) -> str:
    uri = _WS.sub(lambda m: emu.url + emu.workspace_arm_id, uri)
    m = _BLOB.match(uri)
    if m:
        uri = f"{emu.storage_url}/{BLOB_CONTAINER}/" + uri[m.end():]
    return uri


def _send(emu, entry) -> tuple[int, dict, object]:
    body = entry.get("RequestBody")
    recorded_ws = _WS.match(entry["RequestUri"])
    if body is not None and recorded_ws:        # ids in the body name the recorded workspace: name the emulator's
        body = json.loads(json.dumps(body).replace(recorded_ws.group(1), emu.workspace_arm_id))
    data = json.dumps(body).encode() if body is not None else (b"" if entry["RequestMethod"] in ("POST", "PUT")
                                                                else None)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + fake_jwt()}
    if ".blob." in entry["RequestUri"]:
        headers = {"x-ms-version": entry["RequestHeaders"].get("x-ms-version", "2021-08-06")}
    req = urllib.request.Request(_url(emu, entry["RequestUri"]), data=data, method=entry["RequestMethod"],
                                 headers=headers)
    try:
        resp = urllib.request.urlopen(req)
    except urllib.error.HTTPError as err:
        resp = err
    raw = resp.read()
    payload = json.loads(raw) if raw and "json" in (resp.headers.get("Content-Type") or "") else None
    return resp.status, dict(resp.headers), payload


def _shape(value, path="") -> dict:
    """path -> JSON type, for every key at every depth (a list's items under path[])."""
    out = {}
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            out[p] = type(v).__name__
            if not p.startswith(_SHAPE_ONLY):
                out.update(_shape(v, p))
    elif isinstance(value, list) and value:
        for item in value[:1]:
            out.update(_shape(item, path + "[]"))
    return out


def _compare_body(recorded, emulated, where: str) -> list[str]:
    want, got = _shape(recorded), _shape(emulated)
    problems = []
    for path, kind in want.items():
        if path not in got:
            problems.append(f"{where}: {path} missing")
        elif kind != "NoneType" and got[path] != "NoneType" and got[path] != kind:
            problems.append(f"{where}: {path} is {got[path]}, recorded {kind}")
    return problems


def _media(headers: dict) -> str | None:
    value = {k.lower(): v for k, v in headers.items()}.get("content-type")
    return value.split(";")[0].strip() if value else None


def _setup(emu, name: str) -> None:
    """What the recorded workspace held before the recording: its environment, compute and uploaded blob."""
    emu.add_environment("AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "33")
    if name.endswith("invalid_datastore"):
        emu.add_compute("testCompute")
    emu.blobs[(BLOB_CONTAINER, "LocalUpload/00000000000000000000000000000000/data/sample1.csv")] = Blob(b"x")


def test_every_recorded_answer_matches_the_emulators(conformance_dir, monkeypatch):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    problems, replayed = [], 0
    for name, recording in _recordings(conformance_dir).items():
        with AzureMLEmulator(validate_jobs=False) as emu:
            _setup(emu, name)
            for i, entry in enumerate(recording["Entries"]):
                where = f"{name}#{i} {entry['RequestMethod']} {entry['RequestUri'].split('?')[0][-60:]}"
                status, headers, payload = _send(emu, entry)
                replayed += 1
                rec_headers = entry["ResponseHeaders"]
                if status != entry["StatusCode"]:
                    problems.append(f"{where}: HTTP {status}, recorded {entry['StatusCode']} ({payload})")
                    continue
                if ("Location" in rec_headers) != ("Location" in headers):
                    problems.append(f"{where}: Location {'missing' if 'Location' in rec_headers else 'added'}")
                elif "Location" in headers and _url(emu, rec_headers["Location"]) != headers["Location"]:
                    problems.append(f"{where}: Location {headers['Location']}, recorded {rec_headers['Location']}")
                if _media(rec_headers) and _media(rec_headers) != _media(headers):
                    problems.append(f"{where}: Content-Type {_media(headers)}, recorded {_media(rec_headers)}")
                if rec_headers.get("x-ms-error-code") != headers.get("x-ms-error-code"):
                    problems.append(f"{where}: x-ms-error-code {headers.get('x-ms-error-code')}, recorded "
                                    f"{rec_headers.get('x-ms-error-code')}")
                if isinstance(entry.get("ResponseBody"), (dict, list)):
                    problems += _compare_body(entry["ResponseBody"], payload, where)
    assert replayed == 13
    assert problems == [], '\n'.join(problems)
