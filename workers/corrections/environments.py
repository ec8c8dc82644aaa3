"""Environments answer a teacher's rollout: the results of its tool calls and the user's
replies. One small interface, so a team can plug in its own:

    class MyEnvironment:
        def reset(self, task: dict, tools: list[dict], history: list[dict]) -> None:
            # task: {"instruction", "reference"}; tools: OpenAI tool schemas;
            # history: the canonical steps so far (the verified prefix)
            self.db = load_my_database(task)

        def step(self, action: dict) -> Observation:
            # action: the teacher's canonical assistant step ({"content", "tool_calls"})
            if not action.get("tool_calls"):
                return Observation(done=True, reason="final answer")
            results = [{"role": "tool", "tool_call_id": c["id"], "name": c["name"],
                        "content": self.db.call(c["name"], c["arguments"])}
                       for c in action["tool_calls"]]
            return Observation(steps=results)

Name it as `python:mypackage.envs.MyEnvironment`, or serve the same interface over HTTP at
`http://host/env`: POST `/reset` with {"task", "tools", "history"}, POST `/step` with
{"action"} answering {"steps": [...], "done": bool, "reason": str}.

Built in: `replay` (the recorded result of an identical earlier call, else stop) and
`simulated` (a model plays the tools and the user; it needs the session to ask it, so it is
driven by `rollout.Rollout`, not by this interface)."""

from __future__ import annotations

import importlib
import json
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

HTTP_TIMEOUT_S = 60


@dataclass
class Observation:
    """What the environment answers: steps to append (tool results or a user reply), or the
    end of the episode with its reason."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    reason: str = ""


class Environment(Protocol):
    def reset(self, task: dict, tools: list[dict], history: list[dict]) -> None: ...

    def step(self, action: dict) -> Observation: ...


def call_key(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return name + "\x00" + json.dumps(arguments, sort_keys=True, ensure_ascii=False)


class Replay:
    """Answers a call with the recorded result of an identical call (same name, same
    arguments) anywhere in the original run; stops at the first call never made there, and
    at a reply to the user (no recorded user can answer something new)."""

    def __init__(self, original: Sequence[dict[str, Any]]) -> None:
        results = {s.get("tool_call_id"): s for s in original if s["role"] == "tool"}
        self.recorded: dict[str, str] = {}
        for step in original:
            for call in step.get("tool_calls") or []:
                result = results.get(call.get("id"))
                if result is not None:
                    key = call_key(call.get("name", ""), call.get("arguments", {}))
                    self.recorded.setdefault(key, result.get("content") or "")

    def reset(self, task: dict, tools: list[dict], history: list[dict]) -> None:
        pass

    def step(self, action: dict) -> Observation:
        calls = action.get("tool_calls") or []
        if not calls:
            return Observation(done=True, reason="replied to the user: the run ends here")
        steps = []
        for call in calls:
            key = call_key(call["name"], call["arguments"])
            if key not in self.recorded:
                arguments = json.dumps(call["arguments"], sort_keys=True)[:200]
                return Observation(
                    done=True,
                    reason=f"replay has no recorded result for {call['name']}({arguments})",
                )
            steps.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "content": self.recorded[key],
                }
            )
        return Observation(steps=steps)


class HttpEnvironment:
    """The interface over HTTP: POST {url}/reset and {url}/step, JSON both ways."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _post(self, path: str, payload: dict) -> dict:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:  # noqa: S310
            return json.loads(response.read() or b"{}")

    def reset(self, task: dict, tools: list[dict], history: list[dict]) -> None:
        self._post("/reset", {"task": task, "tools": tools, "history": history})

    def step(self, action: dict) -> Observation:
        reply = self._post("/step", {"action": action})
        return Observation(
            steps=list(reply.get("steps") or []),
            done=bool(reply.get("done")),
            reason=str(reply.get("reason") or ""),
        )


def load_python(path: str) -> Environment:
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"python:{path}: give a dotted path, e.g. python:mypkg.envs.Shop")
    return getattr(importlib.import_module(module_name), class_name)()


def validate_name(name: str) -> str:
    """The environment setting, or ValueError saying what is accepted."""
    if name in ("replay", "simulated") or name.startswith(("http://", "https://")):
        return name
    if name.startswith("python:") and "." in name[7:]:
        return name
    raise ValueError(
        f"unknown environment {name!r}: use replay, simulated, python:dotted.path.Class or an "
        "http(s):// URL"
    )
