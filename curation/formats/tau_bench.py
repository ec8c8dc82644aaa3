"""tau-bench result files: a JSON list of `{task_id, reward, info, traj, trial}`.

`traj` is an OpenAI chat message list. Success is `reward == 1`; the instruction and the
expected actions (`info.task`) become the task. The files carry no model name; their names do
(`gpt-4o-airline.json`), so the model and the domain are read from the file name when it has
that shape and `--agent-model` is not given.
"""

from __future__ import annotations

import re
from pathlib import Path

from curation.canonical import Record, RecordError
from curation.formats.openai_chat import message_to_step, step_to_message

NAME = "tau_bench"
DOMAINS = ("airline", "retail")
FILE_NAME = re.compile(rf"^(?P<model>.+)-(?P<domain>{'|'.join(DOMAINS)})$")


def detect(obj: dict) -> bool:
    return "traj" in obj and "task_id" in obj


def parse(obj: dict, source: str = "") -> dict:
    traj = obj["traj"]
    if not isinstance(traj, list):
        raise RecordError(f"expected a list, got {type(traj).__name__}", "traj")
    info = obj.get("info") or {}
    if not isinstance(info, dict):
        raise RecordError(f"expected an object, got {type(info).__name__}", "info")
    task = info.get("task") or {}
    if not isinstance(task, dict):
        raise RecordError(f"expected an object, got {type(task).__name__}", "info.task")
    reward = obj.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise RecordError(f"expected a number, got {reward!r}", "reward")

    match = FILE_NAME.match(Path(source).stem) if source else None
    domain = match["domain"] if match else ""
    task_id = f"{domain}-{obj['task_id']}" if domain else str(obj["task_id"])
    trial = obj.get("trial")
    return {
        "id": f"{task_id}/trial-{trial}",
        "task": {
            "id": task_id,
            "instruction": task.get("instruction"),
            "reference": {k: v for k, v in task.items() if k != "instruction"},
            "metadata": {"domain": domain} if domain else {},
        },
        "agent": {"model": match["model"] if match else ""},
        "steps": [message_to_step(m) for m in traj],
        "outcome": {
            "success": None if reward is None else reward == 1,
            "reward": reward,
            "info": {k: v for k, v in info.items() if k != "task"},
        },
        "metadata": {"task_id": obj["task_id"], "trial": trial},
    }


def dump(record: Record) -> dict:
    task = {"instruction": record.instruction, **record.reference}
    return {
        "task_id": record.metadata.get("task_id", record.task_id),
        "reward": record.reward,
        "info": {"task": task, **record.outcome_info},
        "traj": [step_to_message(s) for s in record.steps],
        "trial": record.metadata.get("trial"),
    }
