"""REST API: projects, tasks, trajectories (with steps) and bulk import, per-project permissions."""

from __future__ import annotations

from typing import Any

from django.core.files import File
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from curation.api.serializers import (
    ImportJobSerializer,
    ImportSummarySerializer,
    ProjectSerializer,
    TaskSerializer,
    TrajectoryDetailSerializer,
    TrajectorySerializer,
)
from curation.canonical import AGENT_ROLES
from curation.formats import FORMATS
from curation.formats.reading import iter_stream
from curation.ingest import Overrides, import_items
from curation.jobs import enqueue_import
from curation.models import ImportJob, Project, Task, Trajectory
from curation.permissions import can_import, visible_projects

BOOLEAN_PARAMS = {"true": True, "1": True, "false": False, "0": False}


class ProjectList(generics.ListAPIView):
    serializer_class = ProjectSerializer

    def get_queryset(self) -> QuerySet[Project]:
        return visible_projects(self.request.user)


class ProjectDetail(generics.RetrieveAPIView):
    serializer_class = ProjectSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Project]:
        return visible_projects(self.request.user)


def _filter_project(queryset: QuerySet, request: Request) -> QuerySet:
    """Rows of the projects the user may see; `?project=` narrows to one (404 if not visible)."""
    projects = visible_projects(request.user)
    if slug := request.query_params.get("project"):
        return queryset.filter(project=get_object_or_404(projects, slug=slug))
    return queryset.filter(project__in=projects)


@extend_schema(parameters=[OpenApiParameter("project", str, description="project slug")])
class TaskList(generics.ListAPIView):
    serializer_class = TaskSerializer

    def get_queryset(self) -> QuerySet[Task]:
        queryset = _filter_project(Task.objects.select_related("project"), self.request)
        if external_id := self.request.query_params.get("external_id"):
            queryset = queryset.filter(external_id=external_id)
        return queryset


class TaskDetail(generics.RetrieveAPIView):
    serializer_class = TaskSerializer

    def get_queryset(self) -> QuerySet[Task]:
        return _filter_project(Task.objects.select_related("project"), self.request)


TRAJECTORY_FILTERS = {
    "task": "task__external_id",
    "agent_model": "agent_model",
    "agent_role": "agent_role",
    "source_format": "source_format",
}


@extend_schema(
    parameters=[
        OpenApiParameter("project", str, description="project slug"),
        OpenApiParameter("task", str, description="task external id"),
        OpenApiParameter("agent_model", str),
        OpenApiParameter("agent_role", str, enum=list(AGENT_ROLES)),
        OpenApiParameter("source_format", str, enum=sorted(FORMATS)),
        OpenApiParameter("success", bool, description="the run's own outcome"),
    ]
)
class TrajectoryList(generics.ListAPIView):
    serializer_class = TrajectorySerializer

    def get_queryset(self) -> QuerySet[Trajectory]:
        params = self.request.query_params
        queryset = _filter_project(
            Trajectory.objects.select_related("project", "task"), self.request
        )
        for param, lookup in TRAJECTORY_FILTERS.items():
            if value := params.get(param):
                queryset = queryset.filter(**{lookup: value})
        if (success := params.get("success")) is not None:
            if success.lower() not in BOOLEAN_PARAMS:
                raise ValidationError({"success": "expected true or false"})
            queryset = queryset.filter(success=BOOLEAN_PARAMS[success.lower()])
        return queryset


class TrajectoryDetail(generics.RetrieveAPIView):
    serializer_class = TrajectoryDetailSerializer

    def get_queryset(self) -> QuerySet[Trajectory]:
        return _filter_project(
            Trajectory.objects.select_related("project", "task", "toolset").prefetch_related(
                "steps"
            ),
            self.request,
        )


class StreamParser(BaseParser):
    """Leaves the body unread so the import can stream it."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return stream


class ProjectImport(APIView):
    """Bulk import: NDJSON in the canonical format (or any importer format, by name).

    The body is read as a stream (JSON Lines, a JSON array or one JSON document), or a
    multipart upload in the field `file`. Answers with the same summary as
    `import_trajectories --json`: 200 when every record landed or was already there, 422 when
    some failed (the good ones still landed; `errors` says which and why). With `?async=1` the
    body is stored and imported by a worker: 202 with the job, whose URL reports progress.
    """

    parser_classes = [StreamParser]

    @extend_schema(
        request={"application/x-ndjson": bytes},
        responses={
            200: ImportSummarySerializer,
            202: ImportJobSerializer,
            422: ImportSummarySerializer,
        },
        parameters=[
            OpenApiParameter("format", str, enum=sorted(FORMATS)),
            OpenApiParameter("agent_model", str),
            OpenApiParameter("agent_role", str, enum=list(AGENT_ROLES[:2])),
            OpenApiParameter("async", bool, description="queue it for a worker: 202 + job"),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        project = get_object_or_404(visible_projects(request.user), slug=slug)
        if not can_import(request.user, project):
            raise PermissionDenied("Importing needs the admin or researcher role in this project.")
        params = request.query_params
        format_name = params.get("format") or None
        if format_name and format_name not in FORMATS:
            raise ValidationError({"format": f"unknown format; choose from {sorted(FORMATS)}"})
        agent_role = params.get("agent_role", "")
        if agent_role and agent_role not in AGENT_ROLES[:2]:
            raise ValidationError({"agent_role": "expected teacher or student"})

        if request.content_type.startswith("multipart/form-data"):
            upload = request._request.FILES.get("file")
            if upload is None:
                raise ValidationError({"file": "send the records in a form field named 'file'"})
            stream, source = upload, upload.name
        else:
            stream, source = request._request, "request body"
        if params.get("async") in ("1", "true"):
            job = ImportJob.objects.create(
                project=project,
                created_by=request.user,
                upload=File(stream, name=source if source != "request body" else "body.jsonl"),
                original_name=source,
                format_name=format_name or "",
                agent_model=params.get("agent_model", ""),
                agent_role=agent_role,
            )
            enqueue_import(job)
            data = ImportJobSerializer(job, context={"request": request}).data
            return Response(data, status=status.HTTP_202_ACCEPTED)
        summary = import_items(
            project,
            iter_stream(stream, source),
            format_name=format_name,
            overrides=Overrides(params.get("agent_model", ""), agent_role),
        )
        code = status.HTTP_422_UNPROCESSABLE_ENTITY if summary.failed else status.HTTP_200_OK
        return Response({"project": project.slug, **summary.as_dict()}, status=code)


class ImportJobDetail(generics.RetrieveAPIView):
    """Status, progress and, once done, the summary of a queued import."""

    serializer_class = ImportJobSerializer

    def get_queryset(self) -> QuerySet[ImportJob]:
        return _filter_project(ImportJob.objects.select_related("project"), self.request)
