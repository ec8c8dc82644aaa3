"""REST API of dataset exports: start one (202 and its URL), follow it, list them, download
their files. Researchers and admins of the project only, as in the browser."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from curation.api.errors import errors
from curation.exports.permissions import can_export
from curation.exports.runner import check_request, create_export, enqueue_export, export_storage
from curation.exports.spec import FORMATS, KINDS, FilterError
from curation.models import DatasetExport, Project
from curation.permissions import visible_projects

DENIED = "Exporting needs the admin or researcher role in this project."


class ExportRequestSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KINDS)
    format = serializers.ChoiceField(choices=FORMATS, default="jsonl")
    filter = serializers.DictField(required=False, default=dict, help_text="see the manifest")


class DatasetExportSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    # None for an export started from the command line (export_dataset).
    created_by = serializers.StringRelatedField(allow_null=True)
    progress = serializers.FloatField(read_only=True)
    url = serializers.HyperlinkedIdentityField(view_name="api-export-detail")
    files = serializers.SerializerMethodField()

    class Meta:
        model = DatasetExport
        fields = [
            "id",
            "url",
            "project",
            "kind",
            "format",
            "filter",
            "version",
            "changed",
            "status",
            "progress",
            "total",
            "processed",
            "counts",
            "content_sha256",
            "files",
            "manifest",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_files(self, export: DatasetExport) -> list[dict]:
        request = self.context["request"]
        return [
            {
                **{k: v for k, v in f.items() if k != "path"},
                "url": request.build_absolute_uri(
                    reverse("api-export-file", args=[export.pk, f["name"]])
                ),
            }
            for f in export.files
        ]


def _member_export(request: Request, pk: int) -> DatasetExport:
    """An export of a project the caller belongs to (404 otherwise), if the caller's role may
    export there (403 otherwise, as on the pages)."""
    export = get_object_or_404(
        DatasetExport.objects.select_related("project", "created_by").filter(
            project__in=visible_projects(request.user)
        ),
        pk=pk,
    )
    if not can_export(request.user, export.project):
        raise PermissionDenied(DENIED)
    return export


@extend_schema(responses={200: DatasetExportSerializer, **errors(401, 403, 404, 429)})
class ProjectExports(generics.ListCreateAPIView):
    """The exports of a project in id order; POST starts one: 202 with its URL."""

    serializer_class = DatasetExportSerializer

    def project(self) -> Project:
        project = get_object_or_404(visible_projects(self.request.user), slug=self.kwargs["slug"])
        if not can_export(self.request.user, project):
            raise PermissionDenied(DENIED)
        return project

    def get_queryset(self) -> QuerySet[DatasetExport]:
        return self.project().exports.select_related("project", "created_by")

    @extend_schema(
        request=ExportRequestSerializer,
        responses={202: DatasetExportSerializer, **errors(400, 401, 403, 404, 415, 429)},
    )
    def post(self, request: Request, slug: str) -> Response:
        project = self.project()
        body = ExportRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        kind, format_name = body.validated_data["kind"], body.validated_data["format"]
        try:
            spec = check_request(project, kind, format_name, body.validated_data["filter"])
        except FilterError as exc:
            raise ValidationError({"filter": {exc.field: [exc.reason]}}) from exc
        export = create_export(project, spec, format_name, request.user)
        enqueue_export(export)
        data = DatasetExportSerializer(export, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": data["url"]})


@extend_schema(responses={200: DatasetExportSerializer, **errors(401, 403, 404, 429)})
class ExportDetail(generics.RetrieveAPIView):
    """Status, progress and, once done, counts, manifest and file URLs of an export."""

    serializer_class = DatasetExportSerializer

    def get_object(self) -> DatasetExport:
        return _member_export(self.request, self.kwargs["pk"])


class ExportFile(APIView):
    """One file of a finished export (data file, README.md or manifest.json)."""

    @extend_schema(
        responses={(200, "application/octet-stream"): bytes, **errors(401, 403, 404, 429)}
    )
    def get(self, request: Request, pk: int, name: str) -> FileResponse:
        export = _member_export(request, pk)
        stored = next((f for f in export.files if f["name"] == name), None)
        if export.status != DatasetExport.Status.DONE or stored is None:
            raise Http404("No such file in this export.")
        stream = export_storage().open(stored["path"], "rb")
        # Always a download, of one type: guessing it from the name would depend on the
        # machine's mime.types (README.md, manifest.json) and leave .jsonl or .parquet unknown.
        return FileResponse(
            stream, as_attachment=True, filename=name, content_type="application/octet-stream"
        )
