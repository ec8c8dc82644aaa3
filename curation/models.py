"""The trajectory store: projects, tasks, trajectories and their steps (DESIGN.md section 3)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from curation.taxonomy import category_names, default_error_taxonomy


class Project(models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    error_taxonomy = models.JSONField(
        default=default_error_taxonomy,
        blank=True,
        help_text="Error categories annotators and judges choose from: [{name, description}].",
    )
    label_schema = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "Extra label fields: [{name, type: numeric|categorical|boolean, "
            "min, max, choices, description}]."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def categories(self) -> list[str]:
        return category_names(self.error_taxonomy)


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin"
        RESEARCHER = "researcher"
        REVIEWER = "reviewer"
        ANNOTATOR = "annotator"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANNOTATOR)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} as {self.role}"


class Task(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=255)
    instruction = models.TextField(blank=True)
    reference = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="task_unique_external_id"
            )
        ]

    def __str__(self) -> str:
        return self.external_id


class ToolSet(models.Model):
    """Tool schemas that runs were given, stored once per project however many runs share them."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="toolsets")
    content_hash = models.CharField(max_length=64)
    tools = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "content_hash"], name="toolset_unique")
        ]

    def __str__(self) -> str:
        names = [t.get("function", t).get("name", "?") for t in self.tools if isinstance(t, dict)]
        return ", ".join(names) or "no tools"


class Trajectory(models.Model):
    class AgentRole(models.TextChoices):
        TEACHER = "teacher"
        STUDENT = "student"
        CORRECTION = "correction"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trajectories")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="trajectories")
    external_id = models.CharField(max_length=255, blank=True)
    agent_model = models.CharField(max_length=200, blank=True)
    agent_role = models.CharField(
        max_length=20, choices=AgentRole.choices, default=AgentRole.STUDENT
    )
    source_format = models.CharField(max_length=40)
    success = models.BooleanField(null=True, help_text="The run's own verified outcome, if any.")
    reward = models.FloatField(null=True, blank=True)
    outcome_info = models.JSONField(default=dict, blank=True)
    toolset = models.ForeignKey(
        ToolSet, null=True, blank=True, on_delete=models.RESTRICT, related_name="trajectories"
    )
    metadata = models.JSONField(default=dict, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    content_hash = models.CharField(max_length=64)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="corrections"
    )
    branch_step = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "trajectories"
        constraints = [
            models.UniqueConstraint(
                fields=["project", "content_hash"], name="trajectory_unique_content"
            )
        ]
        indexes = [
            models.Index(fields=["project", "id"], name="traj_project_id"),
            models.Index(fields=["project", "task"], name="traj_project_task"),
            models.Index(fields=["project", "agent_model"], name="traj_project_model"),
            models.Index(fields=["project", "success"], name="traj_project_outcome"),
            models.Index(fields=["project", "agent_role"], name="traj_project_role"),
        ]

    def __str__(self) -> str:
        return self.external_id or f"trajectory {self.pk}"

    @property
    def tools(self) -> list:
        """The tool schemas of the run (select_related("toolset") to avoid a query)."""
        return self.toolset.tools if self.toolset_id else []


class Step(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    # No index of its own: the unique (trajectory, index) constraint serves lookups by trajectory.
    trajectory = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=20, choices=Role.choices)
    name = models.CharField(max_length=255, blank=True, help_text="Agent or tool name.")
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["trajectory", "index"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "index"], name="step_unique_index")
        ]

    def __str__(self) -> str:
        return f"{self.trajectory_id}:{self.index} {self.role}"


class ImportJob(models.Model):
    """An import handed to a worker (browser uploads, `?async=1` API imports).

    The row is the record of the work: a lost broker message or a killed worker leaves it
    queued or running, and running it again is harmless because imports are idempotent.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    upload = models.FileField(upload_to="imports/%Y/%m/")
    original_name = models.CharField(max_length=255)
    format_name = models.CharField(max_length=40, blank=True)
    agent_model = models.CharField(max_length=200, blank=True)
    agent_role = models.CharField(max_length=20, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    bytes_total = models.PositiveBigIntegerField(default=0)
    bytes_done = models.PositiveBigIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.original_name} ({self.status})"

    @property
    def progress(self) -> float:
        if self.status == self.Status.DONE:
            return 1.0
        return min(self.bytes_done / self.bytes_total, 1.0) if self.bytes_total else 0.0


class DatasetExport(models.Model):
    """One version of a curated dataset (curation/exports/): what was asked, what came out.

    A row is immutable once done. Running the same kind and filter again makes a new row with
    the next `version` of that (project, kind, filter) and says whether the content changed.
    """

    class Kind(models.TextChoices):
        SFT = "sft", "SFT (messages + tools)"
        PREFERENCE = "preference", "preference (DPO)"
        UNPAIRED = "unpaired", "unpaired preference (KTO)"
        STEPWISE = "stepwise", "stepwise supervision (PRM)"
        RL_PREFIX = "rl_prefix", "RL prefixes"

    class Format(models.TextChoices):
        JSONL = "jsonl", "JSON Lines"
        PARQUET = "parquet", "Parquet"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="exports")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    format = models.CharField(max_length=10, choices=Format.choices, default=Format.JSONL)
    filter = models.JSONField(default=dict, blank=True, help_text="The normalized filter spec.")
    filter_key = models.CharField(max_length=64, help_text="sha256 of the filter and format.")
    version = models.PositiveIntegerField()
    changed = models.BooleanField(
        null=True, help_text="Content differs from the previous version; empty for the first."
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0, help_text="Trajectories to read.")
    processed = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    manifest = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list, blank=True, help_text="[{name, path, bytes, sha256}]")
    content_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "kind", "filter_key", "version"], name="export_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} export {self.pk} of {self.project_id} v{self.version} ({self.status})"

    @property
    def progress(self) -> float:
        if self.status == self.Status.DONE:
            return 1.0
        return min(self.processed / self.total, 1.0) if self.total else 0.0
