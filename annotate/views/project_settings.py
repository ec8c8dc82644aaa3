"""Project settings: the error taxonomy and the extra label fields (researchers and admins)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path

from annotate.forms_review import ProjectSettingsForm
from curation.permissions import can_manage, visible_projects


@login_required
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    if not can_manage(request.user, project):
        raise PermissionDenied("Project settings need the researcher or admin role.")
    form = ProjectSettingsForm.for_project(project, request.POST or None)
    if request.method == "POST" and form.is_valid():
        project.error_taxonomy = form.cleaned_data["taxonomy"]
        project.label_schema = form.cleaned_data["label_schema"]
        project.save(update_fields=["error_taxonomy", "label_schema"])
        messages.success(request, "Settings saved.")
        return redirect("project-settings", slug=project.slug)
    return render(request, "annotate/project_settings.html", {"project": project, "form": form})


urls = [path("p/<slug:slug>/settings/", project_settings, name="project-settings")]
