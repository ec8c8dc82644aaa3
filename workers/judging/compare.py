"""The labels a judge evaluation compares, read from the database: a judge config's current
version or a panel on one side; gold labels, humans or adjudications on the other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import OuterRef, QuerySet, Subquery

from annotate.models import Adjudication, Annotation
from curation.models import Project, Step
from workers.judging.evaluation import JudgeEvaluation, Label, evaluate
from workers.models import JudgeConfig, JudgePanel

REFERENCES = ("gold", "humans", "adjudicated")


class UnknownJudge(LookupError):
    pass


@dataclass
class Comparison:
    judge: str  # what was evaluated, e.g. "gpt v3" or "panel trio"
    against: str
    judged: int  # trajectories the judge labelled
    referenced: int  # trajectories the reference labelled
    ties: int  # panel only: trajectories whose verdict vote was tied
    report: JudgeEvaluation

    def as_dict(self) -> dict:
        return {
            "judge": self.judge,
            "against": self.against,
            "judged": self.judged,
            "referenced": self.referenced,
            "panel_ties": self.ties,
            **self.report.as_dict(),
        }


def _step_name(trajectory: str, step: str) -> Subquery:
    return Subquery(
        Step.objects.filter(trajectory=OuterRef(trajectory), index=OuterRef(step)).values("name")[
            :1
        ]
    )


def _labels(annotations: QuerySet[Annotation], agent_from_gold: bool) -> dict[int, list[Label]]:
    """Labels by trajectory. The agent is the name of the step the label names (a gold label
    that names the responsible agent itself, as Who&When does, keeps its own)."""
    rows = annotations.annotate(step_name=_step_name("trajectory", "first_critical_step"))
    out: dict[int, list[Label]] = {}
    for a in rows.values(
        "trajectory_id",
        "verdict",
        "first_critical_step",
        "error_category",
        "responsible_agent",
        "step_name",
    ):
        agent = a["step_name"] or ""
        if agent_from_gold and a["responsible_agent"]:
            agent = a["responsible_agent"]
        elif not agent:
            agent = a["responsible_agent"]
        out.setdefault(a["trajectory_id"], []).append(
            Label(a["verdict"], a["first_critical_step"], a["error_category"], agent)
        )
    return out


def _majority(values: Iterable) -> tuple[object, bool]:
    """The value more than half agree on (None if none), and whether the top was tied."""
    given = [v for v in values if v not in ("", None)]
    if not given:
        return None, False
    counts = Counter(given).most_common()
    tied = len(counts) > 1 and counts[0][1] == counts[1][1]
    value, count = counts[0]
    return (value if count * 2 > len(given) else None), tied


def vote(labels: list[Label]) -> tuple[Label, bool]:
    """Majority of several labels, field by field; a field without a strict majority is left
    empty. Returns the label and whether the verdict vote was tied."""
    verdict, tied = _majority(label.verdict for label in labels)
    step, _ = _majority(label.critical_step for label in labels)
    category, _ = _majority(label.category for label in labels)
    agent, _ = _majority(label.agent for label in labels)
    return Label(verdict or "", step, category or "", agent or ""), tied


def reference_labels(project: Project, against: str) -> dict[int, Label]:
    if against not in REFERENCES:
        raise ValueError(f"--against must be one of {', '.join(REFERENCES)}")
    in_project = {"trajectory__project": project}
    if against == "adjudicated":
        rows = Adjudication.objects.filter(**in_project).annotate(
            step_name=_step_name("trajectory", "first_critical_step")
        )
        return {
            a["trajectory_id"]: Label(
                a["verdict"], a["first_critical_step"], a["error_category"], a["step_name"] or ""
            )
            for a in rows.values(
                "trajectory_id", "verdict", "first_critical_step", "error_category", "step_name"
            )
        }
    source = Annotation.Source.GOLD if against == "gold" else Annotation.Source.HUMAN
    annotations = Annotation.objects.filter(
        **in_project, source=source, status=Annotation.Status.SUBMITTED
    )
    grouped = _labels(annotations, agent_from_gold=True)
    return {pk: vote(labels)[0] if len(labels) > 1 else labels[0] for pk, labels in grouped.items()}


def config_labels(config: JudgeConfig) -> dict[int, Label]:
    if config.current_version is None:
        return {}
    annotations = Annotation.objects.filter(
        trajectory__project=config.project,
        author__isnull=True,
        source__in=[Annotation.Source.JUDGE, Annotation.Source.HEURISTIC],
        source_name=config.current_version.label,
    )
    return {pk: labels[0] for pk, labels in _labels(annotations, agent_from_gold=False).items()}


def panel_labels(panel: JudgePanel) -> tuple[dict[int, Label], int]:
    """The panel's majority label per trajectory any member judged, and how many verdict
    votes were tied."""
    per_member = [config_labels(config) for config in panel.members.select_related("project")]
    items = set().union(*per_member) if per_member else set()
    out, ties = {}, 0
    for item in items:
        label, tied = vote([labels[item] for labels in per_member if item in labels])
        ties += tied
        out[item] = label
    return out, ties


def compare(project: Project, judge: str, against: str) -> Comparison:
    """Evaluate the judge config or panel named `judge` against a reference."""
    reference = reference_labels(project, against)
    config = (
        JudgeConfig.objects.select_related("current_version", "project")
        .filter(project=project, name=judge)
        .first()
    )
    if config is not None:
        labels, ties, name = config_labels(config), 0, str(config.current_version or judge)
    else:
        panel = JudgePanel.objects.filter(project=project, name=judge).first()
        if panel is None:
            raise UnknownJudge(f"no judge config or panel '{judge}' in project '{project.slug}'")
        (labels, ties), name = panel_labels(panel), f"panel {panel.name}"
    return Comparison(name, against, len(labels), len(reference), ties, evaluate(labels, reference))
