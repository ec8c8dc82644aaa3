"""Step critic pages: the project's critic versions with their held-out measures (the list
follows queued trainings with htmx polling), one version in full, training a new version,
and using a version as the project's `critic` judge. Every page needs project membership
(404 otherwise); training and making the judge need the admin or researcher role (403)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from annotate.models import Queue
from annotate.queues import critic_ordered
from curation.models import Project, Trajectory
from curation.permissions import can_manage
from workers.critic import ENCODERS, jobs
from workers.models import CriticModel, JudgeConfig
from workers.views.judges import managed_project, visible_project

LISTED = 20
MEASURES = (
    ("critical step, exact", "step_exact"),
    ("critical step, within one", "step_within_one"),
    ("critical step, within three", "step_within_three"),
    ("agent", "agent"),
)


class TrainForm(forms.Form):
    source = forms.ChoiceField(
        label="Learn from",
        choices=CriticModel.Source.choices,
        initial=CriticModel.Source.EFFECTIVE,
        help_text="Only people's labels: judges' steps never train the critic.",
    )
    encoder = forms.ChoiceField(
        choices=[(e, e) for e in ENCODERS],
        initial="minilm",
        help_text="minilm: the all-MiniLM-L6-v2 sentence encoder; hashing: no model.",
    )
    retrain_after = forms.IntegerField(
        label="Retrain after",
        required=False,
        min_value=1,
        help_text="Train a new version once this many more trajectories are labelled "
        "(checked every few minutes); empty: only when asked.",
    )


def critic_rows(project: Project) -> list[dict[str, Any]]:
    return [
        {"critic": critic, "measures": [critic.metrics.get(key) for _, key in MEASURES]}
        for critic in project.critics.select_related("created_by")[:LISTED]
    ]


def pending(project: Project) -> bool:
    open_statuses = [CriticModel.Status.QUEUED, CriticModel.Status.RUNNING]
    return project.critics.filter(status__in=open_statuses).exists()


def least_sure(project: Project) -> list[Trajectory]:
    """Trajectories the critic judged and no person labelled yet, least sure first."""
    unlabelled = Trajectory.objects.filter(project=project, effective_label__has_human=False)
    ordered = critic_ordered(unlabelled, Queue.Order.UNCERTAINTY, trajectory="pk")
    return list(ordered.filter(critic_confidence__isnull=False)[:10])


def versions_context(request: HttpRequest, project: Project) -> dict[str, Any]:
    """What workers/critic_versions.html needs (the list page polls it alone)."""
    return {
        "project": project,
        "rows": critic_rows(project),
        "pending": pending(project),
        "measure_names": [name for name, _ in MEASURES],
        "can_manage": can_manage(request.user, project),
    }


def page(
    request: HttpRequest, project: Project, form: TrainForm, status: int = 200
) -> HttpResponse:
    context = {
        **versions_context(request, project),
        "form": form,
        "judge": JudgeConfig.objects.filter(
            project=project, name=jobs.JUDGE_NAME, backend=JudgeConfig.Backend.CRITIC
        ).first(),
        "least_sure": least_sure(project),
    }
    return render(request, "workers/critic.html", context, status=status)


@login_required
def critic_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = visible_project(request, slug)
    if request.headers.get("HX-Request"):
        return render(request, "workers/critic_versions.html", versions_context(request, project))
    return page(request, project, TrainForm())


@login_required
@require_POST
def critic_train(request: HttpRequest, slug: str) -> HttpResponse:
    """Queue the training of the next version (a worker on the gpu queue runs it)."""
    project = managed_project(request, slug)
    form = TrainForm(request.POST)
    if form.is_valid():
        try:
            jobs.request(
                project,
                form.cleaned_data["source"],
                form.cleaned_data["encoder"],
                request.user,
                form.cleaned_data["retrain_after"],
            )
        except jobs.NoLabels as error:
            form.add_error(None, str(error))
        else:
            return redirect("critic-list", slug=project.slug)
    return page(request, project, form, status=400)


def project_critic(project: Project, version: int) -> CriticModel:
    return get_object_or_404(
        CriticModel.objects.select_related("project"), project=project, version=version
    )


@login_required
def critic_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    project = visible_project(request, slug)
    critic = project_critic(project, version)
    context = {
        "project": project,
        "critic": critic,
        "measures": [(name, critic.metrics.get(key)) for name, key in MEASURES],
        "calibration": critic.metrics.get("calibration"),
        "can_manage": can_manage(request.user, project),
    }
    return render(request, "workers/critic_detail.html", context)


@login_required
@require_POST
def critic_use(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    """Make the project's `critic` judge (or move it onto this version); then run it from the
    judge's page like any other judge."""
    project = managed_project(request, slug)
    critic = project_critic(project, version)
    if critic.status != CriticModel.Status.DONE:
        return HttpResponse("This version has not finished training.", status=409)
    try:
        config = jobs.use_as_judge(critic, request.user)
    except ValueError as error:
        return HttpResponse(str(error), status=409, content_type="text/plain")
    return redirect("judge-detail", slug=project.slug, name=config.name)


urls = [
    path("p/<slug:slug>/critic/", critic_list, name="critic-list"),
    path("p/<slug:slug>/critic/train/", critic_train, name="critic-train"),
    path("p/<slug:slug>/critic/v<int:version>/", critic_detail, name="critic-detail"),
    path("p/<slug:slug>/critic/v<int:version>/judge/", critic_use, name="critic-use"),
]
