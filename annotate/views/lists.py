"""The trajectory list of a project: filters and keyset pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path

from annotate.models import Annotation
from curation.models import Project, Trajectory
from curation.permissions import can_import, visible_projects

PAGE_SIZE = 50
OUTCOMES: dict[str, dict[str, Any]] = {
    "success": {"success": True},
    "failure": {"success": False},
    "unknown": {"success__isnull": True},
}


class TrajectoryFilter(forms.Form):
    """GET filters of the project page; `after` is the keyset cursor (last id seen)."""

    task = forms.CharField(required=False, max_length=255)
    model = forms.ChoiceField(required=False, label="Agent model")
    role = forms.ChoiceField(required=False, choices=[("", "any")] + Trajectory.AgentRole.choices)
    outcome = forms.ChoiceField(
        required=False, choices=[("", "any")] + [(name, name) for name in OUTCOMES]
    )
    after = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, data: Any, agent_models: list[str]) -> None:
        super().__init__(data)
        self.fields["model"].choices = [("", "any")] + [(m, m) for m in agent_models]

    def filters(self) -> dict[str, Any]:
        """The valid, non-empty filters; a bad value is shown with its error and ignored."""
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v not in ("", None)}


def project_trajectories(project: Project, filters: dict[str, Any]) -> QuerySet[Trajectory]:
    """The project's trajectories in id order, filtered, each marked `has_gold`."""
    gold = Annotation.objects.filter(trajectory=OuterRef("pk"), source=Annotation.Source.GOLD)
    trajectories = (
        Trajectory.objects.filter(project=project)
        .select_related("task")
        .only(
            "external_id",
            "agent_model",
            "agent_role",
            "success",
            "reward",
            "step_count",
            "task__external_id",
        )
        .annotate(has_gold=Exists(gold))
        .order_by("id")
    )
    if "task" in filters:
        trajectories = trajectories.filter(task__external_id=filters["task"])
    if "model" in filters:
        trajectories = trajectories.filter(agent_model=filters["model"])
    if "role" in filters:
        trajectories = trajectories.filter(agent_role=filters["role"])
    if "outcome" in filters:
        trajectories = trajectories.filter(**OUTCOMES[filters["outcome"]])
    if "after" in filters:
        trajectories = trajectories.filter(id__gt=filters["after"])
    return trajectories


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    agent_models = (
        project.trajectories.exclude(agent_model="")
        .order_by("agent_model")
        .values_list("agent_model", flat=True)
        .distinct()
    )
    form = TrajectoryFilter(request.GET, agent_models=list(agent_models))
    filters = form.filters()
    rows = list(project_trajectories(project, filters)[: PAGE_SIZE + 1])  # keyset, never OFFSET
    page = rows[:PAGE_SIZE]
    context = {
        "project": project,
        "form": form,
        "trajectories": page,
        "next_after": page[-1].pk if len(rows) > PAGE_SIZE else None,
        "is_first_page": "after" not in filters,
        "can_import": can_import(request.user, project),
    }
    return render(request, "annotate/project_detail.html", context)


urls = [path("p/<slug:slug>/", project_detail, name="project-detail")]
