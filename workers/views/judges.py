"""Judge pages: the project's judges, making and editing one (each change of what it says
makes a new version), running it, and a batch's progress (htmx polling) and runs. Every page
needs project membership (404 otherwise); changing or running a judge needs the admin or
researcher role (403)."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from curation.models import Project
from curation.permissions import can_manage, visible_projects
from workers import schedule
from workers.forms import JudgeConfigForm
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig, JudgeRun

LISTED = 20


def visible_project(request: HttpRequest, slug: str) -> Project:
    return get_object_or_404(visible_projects(request.user), slug=slug)


def managed_project(request: HttpRequest, slug: str) -> Project:
    project = visible_project(request, slug)
    if not can_manage(request.user, project):
        raise PermissionDenied("Judges are set up and run by the project's admins and researchers.")
    return project


def project_config(project: Project, name: str) -> JudgeConfig:
    configs = JudgeConfig.objects.select_related("project", "current_version")
    return get_object_or_404(configs, project=project, name=name)


def run_counts(version_ids: list[int]) -> dict[int, dict[str, int]]:
    """Runs by status for each of these versions, in one query."""
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (
        JudgeRun.objects.filter(version_id__in=version_ids)
        .values_list("version_id", "status")
        .annotate(n=Count("id"))
    )
    for version_id, status, n in rows:
        counts[version_id][status] = n
    for row in counts.values():
        row["todo"] = row.get("queued", 0) + row.get("running", 0)
    return counts


@login_required
def judge_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = visible_project(request, slug)
    configs = list(project.judge_configs.select_related("current_version"))
    counts = run_counts([c.current_version_id for c in configs if c.current_version_id])
    context = {
        "project": project,
        "rows": [(c, counts.get(c.current_version_id, {})) for c in configs],
        "panels": project.judge_panels.prefetch_related("members"),
        "can_manage": can_manage(request.user, project),
    }
    return render(request, "workers/judge_list.html", context)


@login_required
def judge_edit(request: HttpRequest, slug: str, name: str | None = None) -> HttpResponse:
    project = managed_project(request, slug)
    config = project_config(project, name) if name else JudgeConfig(project=project)
    form = JudgeConfigForm(
        request.POST if request.method == "POST" else None, instance=config, project=project
    )
    if form.is_bound and form.is_valid():
        config = form.save(commit=False)
        if config.pk is None:
            config.created_by = request.user
        config.save()
        runs.current_version(config)
        return redirect("judge-detail", slug=project.slug, name=config.name)
    return render(
        request, "workers/judge_form.html", {"project": project, "form": form, "config": config}
    )


@login_required
def judge_detail(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    project = visible_project(request, slug)
    config = project_config(project, name)
    try:
        matching = schedule.matching(config)
        filter_error = ""
    except ValueError as error:
        matching, filter_error = None, str(error)
    version = config.current_version
    context = {
        "project": project,
        "config": config,
        "versions": config.versions.order_by("-number"),
        "counts": run_counts([version.pk]).get(version.pk, {}) if version else {},
        "matching": matching.count() if matching is not None else 0,
        "unjudged": runs.unjudged(config, matching).count() if matching is not None else 0,
        "filter_error": filter_error,
        "batches": JudgeBatch.objects.filter(version__config=config).select_related("version")[
            :LISTED
        ],
        "failed": JudgeRun.objects.filter(version__config=config, status=JudgeRun.Status.FAILED)
        .select_related("version", "trajectory")
        .order_by("-id")[:LISTED],
        "can_manage": can_manage(request.user, project),
    }
    return render(request, "workers/judge_detail.html", context)


@login_required
@require_POST
def judge_run(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """Judge the matching trajectories the current version has not judged yet."""
    project = managed_project(request, slug)
    config = project_config(project, name)
    try:
        todo = runs.unjudged(config, schedule.matching(config))
    except ValueError as error:
        raise PermissionDenied(str(error)) from None
    batch = runs.start_batch(config, todo, request.user)
    return redirect("judge-batch", pk=batch.pk)


def visible_batch(request: HttpRequest, pk: int) -> JudgeBatch:
    batches = JudgeBatch.objects.select_related("version__config__project")
    return get_object_or_404(
        batches, pk=pk, version__config__project__in=visible_projects(request.user)
    )


@login_required
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The batch's progress; htmx asks for the status part alone every second."""
    batch = visible_batch(request, pk)
    config = batch.version.config
    context = {
        "batch": batch,
        "config": config,
        "project": config.project,
        "progress": runs.progress(batch),
    }
    if request.headers.get("HX-Request"):
        return render(request, "workers/_batch_status.html", context)
    context["recent"] = (
        batch.runs.exclude(status=JudgeRun.Status.QUEUED)
        .select_related("trajectory", "annotation")
        .order_by("-finished_at", "-id")[:LISTED]
    )
    return render(request, "workers/batch_detail.html", context)


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: every question asked, the raw reply, and why a reply was refused."""
    run = get_object_or_404(
        JudgeRun.objects.select_related("version__config__project", "trajectory", "annotation"),
        pk=pk,
        version__config__project__in=visible_projects(request.user),
    )
    context = {"run": run, "config": run.version.config, "project": run.version.config.project}
    return render(request, "workers/run_detail.html", context)


urls = [
    path("p/<slug:slug>/judges/", judge_list, name="judge-list"),
    path("p/<slug:slug>/judges/new/", judge_edit, name="judge-create"),
    path("p/<slug:slug>/judges/<slug:name>/", judge_detail, name="judge-detail"),
    path("p/<slug:slug>/judges/<slug:name>/edit/", judge_edit, name="judge-edit"),
    path("p/<slug:slug>/judges/<slug:name>/run/", judge_run, name="judge-run"),
    path("judge-batches/<int:pk>/", batch_detail, name="judge-batch"),
    path("judge-runs/<int:pk>/", run_detail, name="judge-run-detail"),
]
