"""Helpers shared by the export tests: small projects of runs, labels, corrections, exports."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command

from annotate.effective import refresh
from annotate.models import Annotation
from curation.exports.runner import check_request, create_export, export_storage, run_export
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import DatasetExport, Membership, Project, Step, Trajectory
from workers.models import Correction, CorrectionBatch, TeacherConfig

# What a reflector might tell a teacher; it must never reach an exported file.
GUIDANCE = "SECRET-GUIDANCE-7f3a: the user is lying about the reservation"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a number up.",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
]


def steps(n: int, answer: str = "done") -> list[dict]:
    """system, user, assistant tool call, tool result, assistant answer."""
    return [
        {"role": "system", "content": "You look numbers up."},
        {"role": "user", "content": f"please look up {n}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{n}", "name": "lookup", "arguments": {"n": n}}],
        },
        {"role": "tool", "tool_call_id": f"c{n}", "name": "lookup", "content": f'{{"n": {n}}}'},
        {"role": "assistant", "content": f"{answer} {n}"},
    ]


def record(n: int, task: str, success: bool | None, **extra: Any) -> dict:
    return {
        "id": f"run-{n}",
        "task": {"id": task, "instruction": f"look up {task}", "reference": {"answer": task}},
        "agent": {"model": extra.pop("model", "student-7b"), "role": extra.pop("role", "student")},
        "tools": TOOLS,
        "steps": extra.pop("steps", None) or steps(n),
        "outcome": {"success": success, "reward": None if success is None else float(success)},
        **extra,
    }


def load(project: Project, records: list[dict]) -> list[Trajectory]:
    items = [RawItem("test", f"item {i}", r) for i, r in enumerate(records)]
    summary = import_items(project, items)
    assert not summary.failed, summary.errors
    ids = [r["id"] for r in records]
    return list(Trajectory.objects.filter(project=project, external_id__in=ids).order_by("id"))


def judge(trajectory: Trajectory, verdict: str, critical: int | None = None, **fields: Any):
    Annotation.objects.create(
        trajectory=trajectory,
        source=fields.pop("source", Annotation.Source.JUDGE),
        source_name=fields.pop("source_name", "judge-1"),
        verdict=verdict,
        first_critical_step=critical,
        root_cause_step=critical,
        **fields,
    )
    refresh([trajectory.pk])


def correct(
    original: Trajectory, branch: int, new_steps: list[dict], accepted: bool = True
) -> Trajectory:
    """A correction of `original` from step `branch`: its prefix copied, `new_steps` after,
    accepted or rejected on its `Correction` row, which holds the guidance (also put in the
    run's and steps' metadata here, to prove that no metadata is exported)."""
    prefix = list(original.steps.order_by("index")[:branch])
    digest = hashlib.sha256(f"{original.pk}:{branch}:{json.dumps(new_steps)}".encode())
    correction = Trajectory.objects.create(
        project=original.project,
        task=original.task,
        external_id=f"{original.external_id}/correction-{branch}",
        agent_model="teacher-70b",
        agent_role=Trajectory.AgentRole.CORRECTION,
        source_format="correction",
        toolset=original.toolset,
        metadata={"guidance": GUIDANCE, "mode": "rollout"},
        step_count=branch + len(new_steps),
        content_hash=digest.hexdigest(),
        parent=original,
        branch_step=branch,
    )
    Step.objects.bulk_create(
        [
            Step(
                trajectory=correction,
                index=s.index,
                role=s.role,
                name=s.name,
                content=s.content,
                tool_calls=s.tool_calls,
                tool_call_id=s.tool_call_id,
            )
            for s in prefix
        ]
        + [
            Step(
                trajectory=correction,
                index=branch + i,
                role=s["role"],
                name=s.get("name", ""),
                content=s.get("content", ""),
                tool_calls=s.get("tool_calls", []),
                tool_call_id=s.get("tool_call_id", ""),
                metadata={"guidance": GUIDANCE},
            )
            for i, s in enumerate(new_steps)
        ]
    )
    judge(correction, "success" if accepted else "failure", None if accepted else branch)
    teacher, _ = TeacherConfig.objects.get_or_create(
        project=original.project, name="teacher", defaults={"backend": "openai", "model": "t"}
    )
    batch = CorrectionBatch.objects.create(project=original.project, teacher=teacher)
    Correction.objects.create(
        batch=batch,
        source=original,
        intervention_step=branch,
        teacher_settings=teacher.snapshot(),
        guidance=GUIDANCE,
        result=correction,
        status=Correction.Status.ACCEPTED if accepted else Correction.Status.REJECTED,
    )
    return correction


def export(project: Project, kind: str, format_name: str = "jsonl", **filters: Any):
    spec = check_request(project, kind, format_name, filters)
    return run_export(create_export(project, spec, format_name, None).pk)


def stored(export: DatasetExport) -> dict[str, Path]:
    """The files of a finished export, by name, where the (local) export storage keeps them."""
    assert export.status == DatasetExport.Status.DONE, export.error
    return {f["name"]: Path(export_storage().path(f["path"])) for f in export.files}


def data_files(export: DatasetExport) -> dict[str, Path]:
    """Its data files by split."""
    paths = stored(export)
    return {f["split"]: paths[f["name"]] for f in export.files if "split" in f}


def rows(export: DatasetExport) -> list[dict]:
    """Every row of a JSONL export, train then test."""
    out = []
    for path in data_files(export).values():
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def member(project: Project, role: str, name: str | None = None) -> User:
    user = User.objects.create_user(name or role, password="pw")
    Membership.objects.create(project=project, user=user, role=role)
    return user


def run_command(**options: Any) -> str:
    out = io.StringIO()
    call_command("export_dataset", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()
