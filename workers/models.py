"""Judge configs (versioned), panels, requested batches and one run per trajectory and version.

The database is the record of every requested judging: a batch lists what was asked, each
`JudgeRun` says how far one trajectory got, so a lost message or a dead worker loses nothing
(the task is redelivered and skips what is done) and duplicates nothing (one run per
trajectory and config version, one annotation per run)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from curation.models import Project, Trajectory

DEFAULT_RUBRIC = """You are a careful reviewer of AI agent trajectories. Decide whether the \
agent accomplished the user's task. If it did not, find the first critical error: the \
earliest step after which the task could no longer succeed without undoing it (not merely \
the first imperfect step), and the failure root: the step where the cause of that error \
lies, which may be the same step or an earlier one. Name the error category and the agent \
that wrote the critical step (multi-agent runs), explain briefly, and give your confidence."""


LOCAL_BACKENDS = ("transformers", "vllm")


def worker_queue(backend: str) -> str:
    """Local models run in the GPU workers; HTTP calls and rules in the default ones."""
    return "gpu" if backend in LOCAL_BACKENDS else "default"


class JudgeConfig(models.Model):
    """A way of judging a project's trajectories. Fields that change what a judge says are
    frozen into a `JudgeConfigVersion` each time they change; results belong to a version."""

    class Backend(models.TextChoices):
        HEURISTIC = "heuristic", "heuristic (no model)"
        OPENAI = "openai", "OpenAI-compatible HTTP server"
        TRANSFORMERS = "transformers", "transformers (local weights)"
        VLLM = "vllm", "vLLM in the GPU worker"
        CRITIC = "critic", "learned step critic"

    class Strategy(models.TextChoices):
        ALL_AT_ONCE = "all_at_once", "all at once"
        STEP_BY_STEP = "step_by_step", "step by step"
        BINARY_SEARCH = "binary_search", "binary search"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judge_configs")
    name = models.SlugField(max_length=100, help_text="Letters, digits, - and _.")
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.HEURISTIC)
    model = models.CharField(
        max_length=300, blank=True, help_text="Model name on the server, or a local path."
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Backend options, e.g. {"base_url": "http://127.0.0.1:8001/v1", '
        '"api_key_env": "OPENAI_API_KEY"}. Keys are never stored: name the environment '
        "variable that holds one.",
    )
    strategy = models.CharField(
        max_length=20, choices=Strategy.choices, default=Strategy.ALL_AT_ONCE
    )
    score_steps = models.BooleanField(
        default=True, help_text="Also label and score every assistant step."
    )
    prompt_template = models.TextField(default=DEFAULT_RUBRIC, help_text="The rubric.")
    temperature = models.FloatField(default=0.0)
    top_p = models.FloatField(default=1.0)
    seed = models.IntegerField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(default=1024, help_text="Per reply.")
    token_budget = models.PositiveIntegerField(
        default=16000,
        help_text="Prompt tokens per call; long tool outputs are cut in the middle to fit.",
    )
    max_attempts = models.PositiveSmallIntegerField(
        default=3, help_text="Tries per question before a run is recorded as failed."
    )
    filter = models.JSONField(
        default=dict, blank=True, help_text="Which trajectories: the project list's filters."
    )
    schedule_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Judge new matching trajectories every N minutes (empty: only when asked).",
    )
    is_active = models.BooleanField(default=True)
    current_version = models.ForeignKey(
        "JudgeConfigVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    VERSIONED_FIELDS = (
        "backend",
        "model",
        "options",
        "strategy",
        "score_steps",
        "prompt_template",
        "temperature",
        "top_p",
        "seed",
        "max_tokens",
        "token_budget",
        "max_attempts",
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judgeconfig_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.VERSIONED_FIELDS}

    @property
    def queue(self) -> str:
        return worker_queue(self.backend)


class JudgeConfigVersion(models.Model):
    """What a config was when it judged: annotations name their version as author."""

    config = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    settings = models.JSONField(help_text="The versioned fields of the config at that time.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["config", "number"]
        constraints = [
            models.UniqueConstraint(fields=["config", "number"], name="judgeversion_unique")
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """The annotations' `source_name`: unique per config version."""
        return f"{self.config.name} v{self.number}"


class JudgePanel(models.Model):
    """Several configs whose majority verdict counts as one judge; ties are reported."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judge_panels")
    name = models.SlugField(max_length=100)
    members = models.ManyToManyField(JudgeConfig, related_name="panels")

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judgepanel_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class JudgeBatch(models.Model):
    """One request to judge a set of trajectories with one config version."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    version = models.ForeignKey(JudgeConfigVersion, on_delete=models.CASCADE, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=50, default="asked", help_text="asked or scheduled")
    total = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"batch {self.pk} of {self.version}"


class JudgeRun(models.Model):
    """One trajectory judged by one config version: every call's raw reply, the parsed
    result, tokens, latency, and the error of a run that failed."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    version = models.ForeignKey(JudgeConfigVersion, on_delete=models.CASCADE, related_name="runs")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="judge_runs")
    batch = models.ForeignKey(
        JudgeBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    calls = models.JSONField(
        default=list, blank=True, help_text="Each call: question, raw reply, error, tokens."
    )
    result = models.JSONField(null=True, blank=True, help_text="The validated judgement.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    annotation = models.ForeignKey(
        "annotate.Annotation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["version", "trajectory"], name="judgerun_once")
        ]
        indexes = [models.Index(fields=["batch", "status"], name="judgerun_batch_status")]

    def __str__(self) -> str:
        return f"{self.version} on {self.trajectory_id}: {self.status}"


class TeacherConfig(models.Model):
    """A model that writes corrections (or, as reflector, guidance; or, in the `simulated`
    environment, plays the tools and the user). Reuses the judge backends, no heuristic."""

    class Backend(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible HTTP server"
        TRANSFORMERS = "transformers", "transformers (local weights)"
        VLLM = "vllm", "vLLM in the GPU worker"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="teachers")
    name = models.SlugField(max_length=100)
    backend = models.CharField(max_length=20, choices=Backend.choices)
    model = models.CharField(max_length=300, help_text="Model name on the server, or a path.")
    options = models.JSONField(default=dict, blank=True, help_text="Backend options (no keys).")
    prompt_template = models.TextField(
        blank=True, help_text="Extra system instruction for the teacher (empty: none)."
    )
    temperature = models.FloatField(default=0.0)
    top_p = models.FloatField(default=1.0)
    seed = models.IntegerField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(default=1024)
    max_attempts = models.PositiveSmallIntegerField(default=3)

    SETTINGS = (
        "backend",
        "model",
        "options",
        "prompt_template",
        "temperature",
        "top_p",
        "seed",
        "max_tokens",
        "max_attempts",
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="teacher_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.SETTINGS}

    @property
    def queue(self) -> str:
        return worker_queue(self.backend)


class CorrectionBatch(models.Model):
    """One request to correct a set of failed trajectories with one teacher and set-up."""

    class Mode(models.TextChoices):
        STEP = "step", "replace the critical step"
        ROLLOUT = "rollout", "roll out to the end"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    teacher = models.ForeignKey(TeacherConfig, on_delete=models.PROTECT, related_name="batches")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.STEP)
    environment = models.CharField(
        max_length=500,
        default="replay",
        help_text="replay, simulated, python:dotted.path.Class or http(s)://... (rollout only).",
    )
    guidance = models.BooleanField(default=False)
    reflector = models.ForeignKey(
        TeacherConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    simulator = models.ForeignKey(
        TeacherConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verifier = models.ForeignKey(
        JudgeConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    max_steps = models.PositiveIntegerField(default=20)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    total = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(default=list, blank=True, help_text="[{trajectory, reason}]")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"corrections {self.pk} by {self.teacher}"


class Correction(models.Model):
    """A teacher's take-over of one failed trajectory from its first critical step."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        GENERATED = "generated", "generated, not verified"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        FAILED = "failed"

    FINISHED = (Status.ACCEPTED, Status.REJECTED, Status.FAILED, Status.GENERATED)

    batch = models.ForeignKey(CorrectionBatch, on_delete=models.CASCADE, related_name="corrections")
    source = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="corrections_made"
    )
    intervention_step = models.PositiveIntegerField()
    teacher_settings = models.JSONField(help_text="The teacher config as it was.")
    guidance = models.TextField(blank=True, help_text="Shown to the teacher; never exported.")
    result = models.OneToOneField(
        Trajectory,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="correction",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    reason = models.TextField(blank=True, help_text="The verifier's (or reviewer's) reason.")
    stop_reason = models.CharField(max_length=300, blank=True)
    overridden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    calls = models.JSONField(default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "source"], name="correction_once_per_batch")
        ]
        indexes = [models.Index(fields=["batch", "status"], name="correction_batch_status")]

    def __str__(self) -> str:
        return f"correction of {self.source_id} at {self.intervention_step}: {self.status}"


class CriticModel(models.Model):
    """One training of a project's step critic (workers/critic/): what it learned from, the
    artifact it wrote, and how it did on the tasks it did not see. The row records queued
    work, so the task that trains it may run twice and do it once."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Source(models.TextChoices):
        EFFECTIVE = "effective", "effective label (human sources only)"
        GOLD = "gold", "gold labels"
        HUMANS = "humans", "human annotations"
        ADJUDICATED = "adjudicated", "adjudications"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="critics")
    version = models.PositiveIntegerField()
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.EFFECTIVE)
    encoder = models.CharField(max_length=20, default="minilm")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    artifact = models.CharField(max_length=500, blank=True, help_text="Path of the model file.")
    summary = models.JSONField(default=dict, blank=True, help_text="What it was trained on.")
    metrics = models.JSONField(default=dict, blank=True, help_text="Held-out measures.")
    labelled = models.PositiveIntegerField(
        default=0, help_text="Labelled trajectories in the project when it was trained."
    )
    retrain_after = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Train a new version once this many more trajectories are labelled.",
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="criticmodel_version")
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} critic v{self.version}"
