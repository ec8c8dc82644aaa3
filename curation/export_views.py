"""Dataset exports in the browser: configure and start one, watch it run, download its files,
run it again as a new version. Researchers and admins of the project only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from curation.exports.form import ExportForm
from curation.exports.permissions import can_export
from curation.exports.runner import create_export, enqueue_export, export_storage
from curation.exports.spec import parse_spec
from curation.models import DatasetExport
from curation.permissions import visible_projects

DENIED = "Exporting needs the admin or researcher role in this project."


def _export(request: HttpRequest, pk: int) -> DatasetExport:
    export = get_object_or_404(
        DatasetExport.objects.select_related("project", "created_by"),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    if not can_export(request.user, export.project):
        raise PermissionDenied(DENIED)
    return export


@login_required
def exports(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    if not can_export(request.user, project):
        raise PermissionDenied(DENIED)
    form = ExportForm(project, request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid() and form.spec is not None:
        export = create_export(project, form.spec, form.cleaned_data["format"], request.user)
        enqueue_export(export)
        return redirect("dataset-export", pk=export.pk)
    versions = project.exports.select_related("created_by")[:100]
    return render(
        request, "curation/exports.html", {"project": project, "form": form, "exports": versions}
    )


@login_required
def export_detail(request: HttpRequest, pk: int) -> HttpResponse:
    export = _export(request, pk)
    template = (
        "curation/_export_status.html"
        if request.headers.get("HX-Request") == "true"
        else "curation/export_detail.html"
    )
    return render(request, template, {"export": export, "project": export.project})


@login_required
@require_POST
def export_rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """The same kind, filter and format again: the next version."""
    export = _export(request, pk)
    spec = parse_spec(export.kind, export.filter)
    again = create_export(export.project, spec, export.format, request.user)
    enqueue_export(again)
    return redirect("dataset-export", pk=again.pk)


@login_required
def export_file(request: HttpRequest, pk: int, name: str) -> FileResponse:
    export = _export(request, pk)
    stored = next((f for f in export.files if f["name"] == name), None)
    if export.status != DatasetExport.Status.DONE or stored is None:
        raise Http404("No such file in this export.")
    return FileResponse(
        export_storage().open(stored["path"], "rb"), as_attachment=True, filename=name
    )
