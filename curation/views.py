"""Server-rendered pages of the domain core: the project list and imports from the browser.

Every page needs a login and shows only what `visible_projects` lets the user see.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from curation.forms import ImportForm
from curation.jobs import enqueue_import
from curation.models import ImportJob, Task, Trajectory
from curation.permissions import can_import, visible_projects


def count_per_project(queryset: QuerySet) -> Coalesce:
    """Rows of `queryset` per project as a correlated subquery, so counts never multiply."""
    counts = (
        queryset.filter(project=OuterRef("pk"))
        .order_by()
        .values("project")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    projects = visible_projects(request.user).annotate(
        trajectory_count=count_per_project(Trajectory.objects.all()),
        task_count=count_per_project(Task.objects.all()),
    )
    return render(request, "curation/project_list.html", {"projects": projects})


@login_required
def import_runs(request: HttpRequest, slug: str) -> HttpResponse:
    """Upload a file of runs; a worker imports it and the job page shows its progress."""
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    if not can_import(request.user, project):
        raise PermissionDenied("Importing needs the admin or researcher role in this project.")
    form = ImportForm(request.POST, request.FILES) if request.method == "POST" else ImportForm()
    if form.is_bound and form.is_valid():
        upload = form.cleaned_data["file"]
        job = ImportJob.objects.create(
            project=project,
            created_by=request.user,
            upload=upload,
            original_name=upload.name,
            format_name=form.cleaned_data["format_name"],
            agent_model=form.cleaned_data["agent_model"],
            agent_role=form.cleaned_data["agent_role"],
        )
        enqueue_import(job)
        return redirect("import-job", pk=job.pk)
    jobs = project.import_jobs.all()[:10]
    return render(request, "curation/import.html", {"project": project, "form": form, "jobs": jobs})


@login_required
def import_job(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(
        ImportJob.objects.select_related("project"),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    template = (
        "curation/_import_status.html"
        if request.headers.get("HX-Request") == "true"
        else "curation/import_job.html"
    )
    return render(request, template, {"job": job, "project": job.project})
