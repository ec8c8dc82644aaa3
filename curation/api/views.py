"""REST API: projects, tasks, trajectories (with steps) and bulk import, per-project permissions."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.security import LoginFailures
from curation.api.errors import errors
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
from curation.ingest import ImportSummary, Overrides, import_items
from curation.jobs import enqueue_import
from curation.models import ImportJob, Project, Task, Trajectory
from curation.permissions import can_import, visible_projects

BOOLEAN_PARAMS = {"true": True, "1": True, "false": False, "0": False}


def query_param(request: Request, name: str) -> str | None:
    """A query parameter; 400 if it holds a NUL character, which PostgreSQL refuses in any
    text, so a lookup on it (or storing it) would raise."""
    value = request.query_params.get(name)
    if value is not None and "\x00" in value:
        raise ValidationError({name: "Null characters are not allowed."})
    return value


@extend_schema(
    auth=[],
    responses={
        200: inline_serializer("Token", {"token": serializers.CharField()}),
        **errors(400, 401, 415, 429),
    },
)
class ObtainToken(ObtainAuthToken):
    """The caller's API token, made on first asking, for a username and password (400 when
    they do not match; 401 only for a request that also sends an unknown token). Failed tries
    count with the login page's: past LOGIN_MAX_FAILURES, 429."""

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        username = data.get("username") if isinstance(data, dict) else None  # QueryDict too
        failures = LoginFailures(request._request, username)
        if refused := failures.refusal():
            retry = str(settings.LOGIN_FAILURE_WINDOW_S)
            return Response({"detail": refused}, status=429, headers={"Retry-After": retry})
        try:
            return super().post(request, *args, **kwargs)
        except ValidationError:
            failures.add()
            raise


@extend_schema(responses={200: ProjectSerializer, **errors(401, 404, 429)})
class ProjectList(generics.ListAPIView):
    serializer_class = ProjectSerializer

    def get_queryset(self) -> QuerySet[Project]:
        return visible_projects(self.request.user)


@extend_schema(responses={200: ProjectSerializer, **errors(401, 404, 429)})
class ProjectDetail(generics.RetrieveAPIView):
    serializer_class = ProjectSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Project]:
        return visible_projects(self.request.user)


def _filter_project(queryset: QuerySet, request: Request) -> QuerySet:
    """Rows of the projects the user may see; `?project=` narrows to one (404 if not visible)."""
    projects = visible_projects(request.user)
    if slug := query_param(request, "project"):
        return queryset.filter(project=get_object_or_404(projects, slug=slug))
    return queryset.filter(project__in=projects)


@extend_schema(
    parameters=[
        OpenApiParameter("project", str, description="project slug"),
        OpenApiParameter("external_id", str, description="the task's id in its source"),
    ],
    responses={200: TaskSerializer, **errors(400, 401, 404, 429)},
)
class TaskList(generics.ListAPIView):
    serializer_class = TaskSerializer

    def get_queryset(self) -> QuerySet[Task]:
        queryset = _filter_project(Task.objects.select_related("project"), self.request)
        if external_id := query_param(self.request, "external_id"):
            queryset = queryset.filter(external_id=external_id)
        return queryset


@extend_schema(responses={200: TaskSerializer, **errors(401, 404, 429)})
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
    ],
    responses={200: TrajectorySerializer, **errors(400, 401, 404, 429)},
)
class TrajectoryList(generics.ListAPIView):
    serializer_class = TrajectorySerializer

    def get_queryset(self) -> QuerySet[Trajectory]:
        queryset = _filter_project(
            Trajectory.objects.select_related("project", "task"), self.request
        )
        for param, lookup in TRAJECTORY_FILTERS.items():
            if value := query_param(self.request, param):
                queryset = queryset.filter(**{lookup: value})
        if (success := query_param(self.request, "success")) is not None:
            if success.lower() not in BOOLEAN_PARAMS:
                raise ValidationError({"success": "expected true or false"})
            queryset = queryset.filter(success=BOOLEAN_PARAMS[success.lower()])
        return queryset


@extend_schema(responses={200: TrajectoryDetailSerializer, **errors(401, 404, 429)})
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


class BodyTooLarge(Exception):
    """The import body went past IMPORT_MAX_REQUEST_BYTES while it was read."""


class _Capped:
    """A stream that raises BodyTooLarge once more than `limit` bytes have come through it."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        # Never more than one byte past the limit in memory, whatever `size` asks for.
        room = self.limit + 1 - self.count
        data = self.stream.read(room if size is None or size < 0 else min(size, room))
        self.count += len(data)
        if self.count > self.limit:
            raise BodyTooLarge
        return data


def _content_length(request: Request) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


TOO_LARGE_SCHEMA = inline_serializer(
    "ImportTooLarge",
    {
        "detail": serializers.CharField(),
        "setting": serializers.CharField(),
        "limit": serializers.IntegerField(),
        "cut": serializers.BooleanField(),
        "summary": ImportSummarySerializer(required=False),
    },
)


class ProjectImport(APIView):
    """Bulk import: NDJSON in the canonical format (or any importer format, by name).

    The body is read as a stream (JSON Lines, a JSON array or one JSON document), or a
    multipart upload in the field `file`. Answers with the same summary as
    `import_trajectories --json`: 200 when every record landed or was already there, 422 when
    some failed (the good ones still landed; `errors` says which and why). With `?async=1` the
    body is stored and imported by a worker: 202 with the job, whose URL reports progress.

    A body over IMPORT_MAX_REQUEST_BYTES is answered 413. When its Content-Length says so it
    is refused unread. A body without one (chunked) is counted as it is read: a queued import
    then stores nothing, a direct one stops at the limit, and the batches written by then stay
    (the 413 carries their counts; importing the whole file again skips them as duplicates).
    """

    parser_classes = [StreamParser]

    @extend_schema(
        request={"application/x-ndjson": bytes},
        responses={
            200: ImportSummarySerializer,
            202: ImportJobSerializer,
            413: TOO_LARGE_SCHEMA,
            422: ImportSummarySerializer,
            **errors(400, 401, 403, 404, 429),
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
        format_name = query_param(request, "format") or None
        if format_name and format_name not in FORMATS:
            raise ValidationError({"format": f"unknown format; choose from {sorted(FORMATS)}"})
        agent_role = query_param(request, "agent_role") or ""
        agent_model = query_param(request, "agent_model") or ""
        if agent_role and agent_role not in AGENT_ROLES[:2]:
            raise ValidationError({"agent_role": "expected teacher or student"})

        limit = settings.IMPORT_MAX_REQUEST_BYTES
        length = _content_length(request)
        if length is not None and length > limit:
            return _too_large(
                f"The request body is {length} bytes, over the limit of {limit} bytes per "
                "import request (IMPORT_MAX_REQUEST_BYTES). Nothing was read or stored: send "
                "the records in smaller requests.",
                limit,
            )

        multipart = request.content_type.startswith("multipart/form-data")
        if multipart:
            upload = request._request.FILES.get("file")
            if upload is None:
                raise ValidationError({"file": "send the records in a form field named 'file'"})
            stream, source = _Capped(upload, limit), upload.name
        else:
            stream, source = _Capped(request._request, limit), "request body"
        if query_param(request, "async") in ("1", "true"):
            with tempfile.TemporaryFile(dir=settings.FILE_UPLOAD_TEMP_DIR) as spool:
                try:
                    shutil.copyfileobj(stream, spool)  # the whole body, counted, before storing
                except BodyTooLarge:
                    return _too_large(
                        f"The request body went past the limit of {limit} bytes per import "
                        "request (IMPORT_MAX_REQUEST_BYTES). Nothing was stored: send the "
                        "records in smaller requests.",
                        limit,
                    )
                if length is not None and stream.count < length and not multipart:
                    # The client (or a proxy) went away mid-body: a short read ends the copy
                    # like an end of file, and a job of half the records would look complete.
                    return Response(
                        {
                            "detail": f"The request body ended after {stream.count} of the "
                            f"{length} bytes its Content-Length announced. Nothing was "
                            "stored: send it again."
                        },
                        status=status.HTTP_400_BAD_REQUEST,
                    )
                spool.seek(0)
                job = ImportJob.objects.create(
                    project=project,
                    created_by=request.user,
                    upload=File(spool, name=source if source != "request body" else "body.jsonl"),
                    original_name=source,
                    format_name=format_name or "",
                    agent_model=agent_model,
                    agent_role=agent_role,
                )
            enqueue_import(job)
            data = ImportJobSerializer(job, context={"request": request}).data
            return Response(data, status=status.HTTP_202_ACCEPTED)
        summary = ImportSummary()
        try:
            import_items(
                project,
                iter_stream(stream, source),
                format_name=format_name,
                overrides=Overrides(agent_model, agent_role),
                summary=summary,
            )
        except BodyTooLarge:
            return _too_large(
                f"The request body went past the limit of {limit} bytes per import request "
                "(IMPORT_MAX_REQUEST_BYTES) and the import was cut there: the records written "
                f"before it landed ({summary.created} created, {summary.duplicates} "
                "duplicates), the rest were not imported. Send the rest in smaller requests; "
                "records already there are skipped as duplicates.",
                limit,
                {"project": project.slug, **summary.as_dict()},
            )
        code = status.HTTP_422_UNPROCESSABLE_ENTITY if summary.failed else status.HTTP_200_OK
        return Response({"project": project.slug, **summary.as_dict()}, status=code)


def _too_large(detail: str, limit: int, summary: dict | None = None) -> Response:
    data: dict[str, Any] = {
        "detail": detail,
        "setting": "IMPORT_MAX_REQUEST_BYTES",
        "limit": limit,
        "cut": summary is not None,
    }
    if summary is not None:
        data["summary"] = summary
    return Response(data, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


@extend_schema(responses={200: ImportJobSerializer, **errors(401, 404, 429)})
class ImportJobDetail(generics.RetrieveAPIView):
    """Status, progress and, once done, the summary of a queued import."""

    serializer_class = ImportJobSerializer

    def get_queryset(self) -> QuerySet[ImportJob]:
        return _filter_project(ImportJob.objects.select_related("project"), self.request)
