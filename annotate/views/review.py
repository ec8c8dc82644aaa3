"""The review page: one trajectory with its steps and labels.

It needs a login; a trajectory outside `visible_projects` is a 404. It runs a fixed number of
SQL queries, however many steps it shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path

from annotate.models import Annotation
from annotate.views.annotation import form_context
from curation.models import Step, Trajectory
from curation.permissions import visible_projects

LONG_CONTENT = 2000  # characters; longer step content is folded into a <details>


def pretty_json(value: Any) -> str:
    """Indented JSON; a string (malformed tool arguments, kept as written) stays as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass
class ShownCall:
    id: str
    name: str
    arguments: str


@dataclass
class ShownStep:
    step: Step
    calls: list[ShownCall]
    metadata: str
    critical: bool

    @property
    def long(self) -> bool:
        return len(self.step.content) > LONG_CONTENT


def shown_step(step: Step, critical_steps: set[int]) -> ShownStep:
    calls = [
        ShownCall(
            id=str(call.get("id") or ""),
            name=str(call.get("name") or ""),
            arguments=pretty_json(call.get("arguments", {})),
        )
        for call in step.tool_calls
    ]
    return ShownStep(
        step=step,
        calls=calls,
        metadata=pretty_json(step.metadata) if step.metadata else "",
        critical=step.index in critical_steps,
    )


def json_sections(trajectory: Trajectory) -> list[tuple[str, str]]:
    """The trajectory's JSON blobs worth a look, as (title, indented JSON), empty ones left out."""
    sections = [
        ("Task reference", trajectory.task.reference),
        ("Outcome info", trajectory.outcome_info),
        (f"Tools ({len(trajectory.tools)})", trajectory.tools),
        ("Metadata", trajectory.metadata),
    ]
    return [(title, pretty_json(value)) for title, value in sections if value]


@login_required
def trajectory_detail(request: HttpRequest, pk: int) -> HttpResponse:
    trajectory = get_object_or_404(
        Trajectory.objects.select_related("project", "task", "toolset"),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    gold = list(trajectory.annotations.filter(source=Annotation.Source.GOLD))
    critical_steps = {a.first_critical_step for a in gold if a.first_critical_step is not None}
    context = {
        "trajectory": trajectory,
        "gold": gold,
        "steps": [shown_step(step, critical_steps) for step in trajectory.steps.all()],
        "json_sections": json_sections(trajectory),
    }
    context.update(form_context(request, trajectory))
    return render(request, "annotate/trajectory_detail.html", context)


urls = [path("t/<int:pk>/", trajectory_detail, name="trajectory-detail")]
