"""The trajectories an export reads: its spec as one queryset.

Labels live in the annotate app; they are read here through the related names of
`Trajectory` (`effective_label`, `step_scores`, `annotations`), never by importing it.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet

from curation.exports.corrections import exportable
from curation.exports.lengths import load_tokenizer
from curation.exports.spec import HUMAN_LEVEL, SOURCE_RANK, ExportSpec, FilterError
from curation.models import Project, Task, Trajectory

ORIGINALS_ONLY = ("preference", "rl_prefix")  # their rows start from runs, not corrections


def _related(name: str) -> type:
    return Trajectory._meta.get_field(name).related_model


def _scores(**lookups: object) -> Exists:
    return Exists(_related("step_scores").objects.filter(trajectory=OuterRef("pk"), **lookups))


def _has_gold() -> Exists:
    annotations = _related("annotations").objects.filter(
        trajectory=OuterRef("pk"), source="gold", status="submitted"
    )
    return Exists(annotations)


def sources_at_least(min_source: str) -> tuple[str, ...]:
    """Verdict sources at least as good as `min_source` ("gold": human level and a gold label)."""
    if min_source == "gold":
        return HUMAN_LEVEL
    return SOURCE_RANK[: SOURCE_RANK.index(min_source) + 1]


def _label_filters(spec: ExportSpec) -> Q:
    q = Q(effective_label__verdict__in=spec.used_verdicts)
    if spec.min_source:
        q &= Q(effective_label__verdict_source__in=sources_at_least(spec.min_source))
        if spec.min_source == "gold":
            q &= Q(_has_gold())
    if spec.require_agreement:
        q &= Q(effective_label__humans_disagree=False, effective_label__judge_disagrees=False)
    if spec.categories:
        q &= Q(effective_label__error_category__in=spec.categories)
    if spec.kind == "rl_prefix":
        q &= Q(effective_label__first_critical_step__isnull=False)
    return q


def _run_filters(spec: ExportSpec) -> Q:
    q = Q()
    if spec.tasks:
        q &= Q(task__external_id__in=spec.tasks)
    if spec.agent_models:
        q &= Q(agent_model__in=spec.agent_models)
    if spec.agent_roles:
        q &= Q(agent_role__in=spec.agent_roles)
    if spec.min_steps is not None:
        q &= Q(step_count__gte=spec.min_steps)
    if spec.max_steps is not None:
        q &= Q(step_count__lte=spec.max_steps)
    if spec.step_score_min is not None or spec.step_score_max is not None:
        q &= Q(_scores(score__isnull=False))
    if spec.step_score_min is not None:
        q &= ~Q(_scores(score__lt=spec.step_score_min))
    if spec.step_score_max is not None:
        q &= ~Q(_scores(score__gt=spec.step_score_max))
    return q


def selected(project: Project, spec: ExportSpec) -> QuerySet[Trajectory]:
    """The runs the export builds its rows from (unordered)."""
    queryset = Trajectory.objects.filter(project=project).filter(exportable())
    if spec.kind in ORIGINALS_ONLY:
        queryset = queryset.exclude(agent_role=Trajectory.AgentRole.CORRECTION)
    return queryset.filter(_label_filters(spec), _run_filters(spec))


def check_spec(project: Project, spec: ExportSpec) -> None:
    """The checks a spec needs the database or the disk for: named tasks exist, the named
    tokenizer loads. Raises FilterError."""
    if spec.tasks:
        found = set(
            Task.objects.filter(project=project, external_id__in=spec.tasks).values_list(
                "external_id", flat=True
            )
        )
        if missing := [t for t in spec.tasks if t not in found]:
            raise FilterError("tasks", f"no task {missing[0]!r} in project {project.slug}")
    if spec.tokenizer:
        load_tokenizer(spec.tokenizer)
