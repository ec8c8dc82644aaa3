"""Review and adjudication: reviewers see trajectories whose human labels disagree, compare the
labels side by side and record the final one, which outranks every other source."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path

from annotate import history
from annotate.effective import COMPARED, HUMAN_SOURCES, refresh
from annotate.forms_review import LABEL_FIELDS, AdjudicationForm
from annotate.models import Adjudication, Annotation, EffectiveLabel
from annotate.paging import keyset_page
from curation.models import Project, Step, Trajectory
from curation.permissions import can_review, visible_projects

SHOW = ("open", "adjudicated", "all")
CONFLICT = (
    "Another reviewer saved an adjudication of this trajectory meanwhile; "
    "reload the page to see it before saving yours."
)


def reviewed_project(request: HttpRequest, slug: str) -> Project:
    """The project if the user reviews it: 404 for non-members, 403 for other roles."""
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    if not can_review(request.user, project):
        raise PermissionDenied("Adjudication needs the reviewer or admin role in this project.")
    return project


def human_labels() -> QuerySet[Annotation]:
    return Annotation.objects.filter(
        source__in=HUMAN_SOURCES, status=Annotation.Status.SUBMITTED
    ).select_related("author")


def disagreements(project: Project, show: str) -> QuerySet[Trajectory]:
    """The project's trajectories whose human labels disagree, in id order."""
    trajectories = Trajectory.objects.filter(
        project=project, effective_label__humans_disagree=True
    ).order_by("id")
    if show == "open":
        return trajectories.filter(adjudication__isnull=True)
    if show == "adjudicated":
        return trajectories.filter(adjudication__isnull=False)
    return trajectories


@login_required
def adjudication_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = reviewed_project(request, slug)
    show = request.GET.get("show", "open")
    show = show if show in SHOW else "open"
    after = request.GET.get("after", "")
    trajectories = (
        disagreements(project, show)
        .select_related("task", "adjudication")
        .prefetch_related(Prefetch("annotations", human_labels(), to_attr="human_labels"))
    )
    if after.isdigit():
        trajectories = trajectories.filter(pk__gt=int(after))
    context = {
        "project": project,
        "show": show,
        "choices": SHOW,
        **keyset_page(trajectories, is_first_page=not after.isdigit()),
    }
    return render(request, "annotate/adjudication_list.html", context)


def related(trajectory: Trajectory, name: str) -> Any:
    """A reverse one-to-one of the trajectory (select_related), or None where there is none."""
    try:
        return getattr(trajectory, name)
    except ObjectDoesNotExist:
        return None


def stamp(adjudication: Adjudication | None) -> str:
    """What identifies the version of an adjudication a reviewer saw."""
    return adjudication.updated_at.isoformat() if adjudication else ""


def initial_label(
    adjudication: Adjudication | None, effective: EffectiveLabel | None
) -> dict[str, Any]:
    """The form's starting values: the adjudication, else the current effective label."""
    source = adjudication or effective
    initial = {f: getattr(source, f, None) for f in LABEL_FIELDS} if source else {}
    return {**initial, "based_on": stamp(adjudication)}


def save_adjudication(form: AdjudicationForm, trajectory: Trajectory, reviewer: Any) -> bool:
    """Store the form's label, record it in the history and refresh the effective label;
    refused (False, with the form's error set) if the adjudication changed since the reviewer
    loaded it."""
    try:
        with transaction.atomic():
            current = Adjudication.objects.select_for_update().filter(trajectory=trajectory)
            adjudication = current.first()
            if stamp(adjudication) != form.cleaned_data["based_on"]:
                form.add_error(None, CONFLICT)
                return False
            before = history.values_of(adjudication) if adjudication else None
            adjudication = adjudication or Adjudication(trajectory=trajectory)
            for field in LABEL_FIELDS:
                setattr(adjudication, field, form.cleaned_data[field])
            adjudication.reviewer = reviewer
            adjudication.save()
            history.record_adjudication(adjudication, before, reviewer)
            refresh([trajectory.pk])
    except IntegrityError:  # another reviewer created the first adjudication at the same time
        form.add_error(None, CONFLICT)
        return False
    return True


def differing(labels: list[Annotation]) -> set[str]:
    """The compared fields on which these labels differ."""
    return {
        field
        for field in COMPARED
        if len({v for a in labels if (v := getattr(a, field)) not in ("", None)}) > 1
    }


def marked_steps(trajectory: Trajectory, labels: list[Any]) -> QuerySet[Step]:
    """The steps any label marks as the first critical error or the root cause."""
    marked = {
        step
        for label in labels
        for step in (label.first_critical_step, label.root_cause_step)
        if step is not None
    }
    return trajectory.steps.filter(index__in=marked).only(
        "trajectory_id", "index", "role", "name", "content"
    )


@login_required
def adjudication_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project = reviewed_project(request, slug)
    trajectory = get_object_or_404(
        Trajectory.objects.select_related(
            "project", "task", "effective_label", "adjudication__reviewer"
        ),
        project=project,
        pk=pk,
    )
    adjudication = related(trajectory, "adjudication")
    effective = related(trajectory, "effective_label")
    if request.method == "POST":
        form = AdjudicationForm(request.POST, trajectory=trajectory)
        if form.is_valid() and save_adjudication(form, trajectory, request.user):
            messages.success(request, "Adjudication saved; the effective label follows it.")
            return redirect("adjudication-detail", slug=project.slug, pk=trajectory.pk)
    else:
        form = AdjudicationForm(
            initial=initial_label(adjudication, effective), trajectory=trajectory
        )
    labels = list(human_labels().filter(trajectory=trajectory).order_by("source", "id"))
    context = {
        "project": project,
        "trajectory": trajectory,
        "labels": labels,
        "differing": differing(labels),
        "effective": effective,
        "adjudication": adjudication,
        "steps": marked_steps(trajectory, [*labels, adjudication] if adjudication else labels),
        "form": form,
        "next_open": disagreements(project, "open")
        .filter(pk__gt=trajectory.pk)
        .values_list("pk", flat=True)
        .first(),
    }
    return render(request, "annotate/adjudication_detail.html", context)


urls = [
    path("p/<slug:slug>/review/", adjudication_list, name="adjudication-list"),
    path("p/<slug:slug>/review/<int:pk>/", adjudication_detail, name="adjudication-detail"),
]
