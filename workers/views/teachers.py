"""Teacher configs: making and editing the models that write corrections (researchers and
admins of the project; 403 for other members, 404 for outsiders)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path

from workers.forms import TeacherConfigForm
from workers.models import TeacherConfig
from workers.views.judges import managed_project


@login_required
def teacher_edit(request: HttpRequest, slug: str, name: str | None = None) -> HttpResponse:
    project = managed_project(request, slug)
    teacher = (
        get_object_or_404(TeacherConfig, project=project, name=name)
        if name
        else TeacherConfig(project=project)
    )
    form = TeacherConfigForm(
        request.POST if request.method == "POST" else None, instance=teacher, project=project
    )
    if form.is_bound and form.is_valid():
        form.save()
        return redirect("correction-list", slug=project.slug)
    context = {"project": project, "form": form, "teacher": teacher}
    return render(request, "workers/teacher_form.html", context)


urls = [
    path("p/<slug:slug>/teachers/new/", teacher_edit, name="teacher-create"),
    path("p/<slug:slug>/teachers/<slug:name>/edit/", teacher_edit, name="teacher-edit"),
]
