"""Run history as the emulator answers it (/history/v1.0/.../runs/ID[/details], PATCH of a run's tags): a
job's run, its run details with logFiles, and the log text each rank has written so far."""

from __future__ import annotations

import copy
import uuid
from typing import Any, Dict, List, Tuple
from urllib.parse import quote

from .wire import ARTIFACT_CONTAINER, SAS_QUERY, TERMINAL_STATUSES, HTTPError, JobState, _json, _now_iso


class RunHistory:
    """AzureMLEmulator's run-history routes and log text (a mixin: the state is the emulator's)."""

    def _history(self, method: str, run_id: str, rest: str, query: Dict[str, str],
                 body: Any = None) -> Tuple[int, Dict[str, str], bytes]:
        if method == "PATCH":
            return self._patch_run(run_id, rest, body)
        if method != "GET":
            raise HTTPError(404, "NotFound", f"The emulator has no route for {method} runs/{run_id}{rest}")
        state = self._job(run_id)
        with self._lock:
            status = self._status(state, advance=True)
            if rest in ("", "/"):
                return _json(200, self._run(state, status))
            if rest == "/details":
                details = self._run(state, status)
                details["logFiles"] = self.artifacts.log_files(state, status)
                details["runDefinition"] = {"command": state.props.get("command")}
                details["warnings"] = []
                return _json(200, details)
        raise HTTPError(404, "NotFound", f"The emulator has no route for GET runs/{run_id}{rest}")

    def _patch_run(self, run_id: str, rest: str, body: Any) -> Tuple[int, Dict[str, str], bytes]:
        """The run history's edits, which the SDK's jobs.update/archive/restore send (Studio's inline edits):
        PATCH runs/{id} with a CreateRun (displayName, description, tags and properties merged, hidden = the
        job's isArchived) and PATCH runs/{id}/tags with tagsToModify/tagsToDelete. The job resource then
        answers with them where the REST spec puts them (properties.tags, displayName, description, isArchived)."""
        if not isinstance(body, dict):
            raise HTTPError(400, "UserError", "The request body must be a JSON object.")
        state = self._job(run_id)
        with self._lock:
            props = state.body.setdefault("properties", {})
            tags = dict(props.get("tags") or {})
            if rest in ("", "/"):
                for key, field_name in (("displayName", "displayName"), ("description", "description"),
                                        ("hidden", "isArchived")):
                    if body.get(key) is not None:
                        props[field_name] = body[key]
                tags.update(body.get("tags") or {})
                if body.get("properties"):
                    props["properties"] = {**(props.get("properties") or {}), **body["properties"]}
            elif rest == "/tags":
                tags.update(body.get("tagsToModify") or {})
                for key in body.get("tagsToDelete") or []:
                    tags.pop(key, None)
            else:
                raise HTTPError(404, "NotFound", f"The emulator has no route for PATCH runs/{run_id}{rest}")
            props["tags"] = tags
            self.run_patches.append((run_id, rest or "/", copy.deepcopy(body)))
            return _json(200, self._run(state, self._status(state, advance=False)))

    def _run(self, state: JobState, status: str) -> Dict[str, Any]:
        run: Dict[str, Any] = {
            "runId": state.name,
            "runUuid": str(uuid.uuid5(uuid.NAMESPACE_URL, state.name)),
            "status": status,
            "target": (state.props.get("computeId") or "").rsplit("/", 1)[-1] or None,
            "createdTimeUtc": _now_iso(state.created),
            "startTimeUtc": _now_iso(state.started) if state.started is not None else None,
            "tags": dict(state.props.get("tags") or {}),
            "properties": dict(state.props.get("properties") or {}),
            "runType": "azureml.scriptrun",
            "experimentId": str(uuid.uuid5(uuid.NAMESPACE_URL, state.props.get("experimentName") or "Default")),
            "displayName": state.props.get("displayName") or state.name,
        }
        if status in TERMINAL_STATUSES:
            run["endTimeUtc"] = _now_iso()
        if status == "Failed":
            err = state.script.error or {"code": "UserError", "message": "Job failed (scripted by the emulator)."}
            run["error"] = {"error": err}
        elif status in ("NotResponding", "Paused") and state.script.error:   # e.g. a lost or preempted node
            run["error"] = {"error": state.script.error}
        return run

    # -- logs ----------------------------------------------------------------------------------------
    def _world_size(self, state: JobState) -> int:
        dist = state.props.get("distribution") or {}
        nodes = int((state.props.get("resources") or {}).get("instanceCount") or 1)
        dtype = dist.get("distributionType")
        if dtype in ("PyTorch", "Mpi"):
            return nodes * int(dist.get("processCountPerInstance") or 1)
        if dtype == "TensorFlow":
            return int(dist.get("workerCount") or nodes) + int(dist.get("parameterServerCount") or 0)
        return nodes                  # without a distribution the command runs once on every node

    def _log_names(self, state: JobState) -> List[str]:
        """Every rank's user log, in rank order: a TensorFlow job's parameter servers come after its workers,
        each named ..._K_ps.txt (K counting parameter servers from 0, as the SDK's rank-0 pattern implies)."""
        if not state.props.get("distribution") and self._world_size(state) == 1:
            return ["user_logs/std_log.txt"]
        world, w = self._world_size(state), self.log_name_width
        dist = state.props.get("distribution") or {}
        servers = int(dist.get("parameterServerCount") or 0) if dist.get("distributionType") == "TensorFlow" else 0
        names = [f"user_logs/std_log_process_{i:0{w}d}.txt" for i in range(world - servers)]
        return names + [f"user_logs/std_log_process_{k:0{w}d}_ps.txt" for k in range(servers)]

    def _log_url(self, state: JobState, name: str) -> str:
        return (f"{self.storage_url}/{ARTIFACT_CONTAINER}/ExperimentRun/dcid.{state.name}/"
                f"{quote(name)}?{SAS_QUERY.replace('sr=c', 'sr=b').replace('sp=racwl', 'sp=r')}")

    def _log_text(self, state: JobState, name: str) -> str:
        names = self._log_names(state)
        if name not in names:
            raise KeyError(name)
        rank = names.index(name)
        lines = self._generated_lines(state, name, rank, len(names))
        out, done = [], 0
        for at, text in state.appended.get(rank, []):
            at = min(at, len(lines))
            out.extend(line + "\n" for line in lines[done:at])
            done = max(done, at)
            out.append(text)
        out.extend(line + "\n" for line in lines[done:])
        return "".join(out)

    def _generated_lines(self, state: JobState, name: str, rank: int, world: int) -> List[str]:
        statuses = state.script.statuses
        position = self._position(state, advance=False)
        if state.cancel_requested is not None:
            position = state.frozen_position if state.frozen_position is not None else position
        running = [i for i, s in enumerate(statuses) if s in ("Running", "Finalizing")]
        lines: List[str] = []
        if running:
            start = running[0]
            terminal = next((i for i, s in enumerate(statuses) if s in TERMINAL_STATUSES), len(statuses))
            upto = min(position, terminal)
            count = int((upto - start) * state.script.log_lines_per_step) + 1 if upto >= start else 0
            for k in range(count):
                lines.append(
                    f"[rank {rank}/{world}] {state.name} step {k}: loss={1.0 / (k + 1):.4f}" if k
                    else f"[rank {rank}/{world}] {state.name} started: {state.props.get('command', '')}"
                )
            if position >= terminal and terminal < len(statuses) and statuses[terminal] == "Completed":
                lines.append(f"[rank {rank}/{world}] {state.name} finished")
        return lines
