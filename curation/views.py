"""Server-rendered pages for browsing what was imported."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from curation.permissions import visible_projects


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    projects = visible_projects(request.user).annotate(
        trajectory_count=Count("trajectories", distinct=True),
        task_count=Count("tasks", distinct=True),
    )
    return render(request, "curation/project_list.html", {"projects": projects})
