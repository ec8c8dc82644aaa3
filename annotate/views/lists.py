"""The trajectory list of a project: filters and keyset pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import BooleanField, Exists, OuterRef, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import path

from annotate.models import Annotation, EffectiveLabel
from annotate.paging import keyset_page
from curation.models import Project, Step, Trajectory
from curation.permissions import (
    IMPORT_ROLES,
    MANAGE_ROLES,
    REVIEW_ROLES,
    role_in,
    visible_projects,
)

ANY = [("", "any")]
OUTCOMES: dict[str, dict[str, Any]] = {
    "success": {"success": True},
    "failure": {"success": False},
    "unknown": {"success__isnull": True},
}
Source = EffectiveLabel.Source
# The effective verdict's source; "human" takes in agreeing humans (gold labels count as human).
SOURCES: dict[str, list[str]] = {
    "human": [Source.HUMAN, Source.HUMANS_AGREE],
    **{value: [value] for value in Source.values if value != Source.HUMAN},
    "none": [""],
}
SOURCE_CHOICES = [("human", "human or gold")] + [
    (value, label) for value, label in Source.choices if value != Source.HUMAN
]
YES_NO = ANY + [("yes", "yes"), ("no", "no")]
FLAGS = {  # filter name: EffectiveLabel field
    "annotated": "has_human",
    "judge_disagrees": "judge_disagrees",
    "humans_disagree": "humans_disagree",
}


class TrajectoryFilter(forms.Form):
    """GET filters of the project page; `after` is the keyset cursor (last id seen)."""

    q = forms.CharField(required=False, max_length=200, label="Text in steps", strip=True)
    task = forms.CharField(required=False, max_length=255)
    model = forms.ChoiceField(required=False, label="Agent model")
    role = forms.ChoiceField(required=False, choices=ANY + Trajectory.AgentRole.choices)
    outcome = forms.ChoiceField(required=False, choices=ANY + [(n, n) for n in OUTCOMES])
    verdict = forms.ChoiceField(
        required=False, label="Effective verdict", choices=ANY + Annotation.Verdict.choices
    )
    source = forms.ChoiceField(
        required=False, label="Verdict source", choices=ANY + SOURCE_CHOICES + [("none", "none")]
    )
    category = forms.ChoiceField(required=False, label="Error category")
    annotated = forms.ChoiceField(required=False, label="Annotated", choices=YES_NO)
    judge_disagrees = forms.ChoiceField(required=False, label="Judge disagrees", choices=YES_NO)
    humans_disagree = forms.ChoiceField(required=False, label="Humans disagree", choices=YES_NO)
    after = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, data: Any, agent_models: list[str], categories: Sequence[str] = ()) -> None:
        super().__init__(data)
        self.fields["model"].choices = ANY + [(m, m) for m in agent_models]
        self.fields["category"].choices = ANY + [(c, c) for c in categories]

    def filters(self) -> dict[str, Any]:
        """The valid, non-empty filters; a bad value is shown with its error and ignored."""
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v not in ("", None)}


# PostgreSQL: OFFSET 0 keeps the EXISTS a per-trajectory check walked in id order, so a page
# stops after its 50 matches. Without it the planner (whose guess for LIKE '%...%' is far off)
# makes it a semi-join that reads every matching step first. At 100k runs: a word in every run
# 580 ms -> 24 ms, a word in none 90 ms -> 390 ms. A trigram index would make both fast.
FENCED_SEARCH = (
    "EXISTS (SELECT 1 FROM curation_step s WHERE s.trajectory_id = curation_trajectory.id"
    " AND UPPER(s.content) LIKE UPPER(%s) OFFSET 0)"
)


def search_steps(trajectories: QuerySet[Trajectory], text: str) -> QuerySet[Trajectory]:
    """Trajectories with a step whose content holds `text`, case-insensitively."""
    if connection.vendor == "postgresql":
        pattern = f"%{connection.ops.prep_for_like_query(text)}%"
        return trajectories.filter(RawSQL(FENCED_SEARCH, [pattern], output_field=BooleanField()))
    matching = Step.objects.filter(trajectory=OuterRef("pk"), content__icontains=text)
    return trajectories.filter(Exists(matching))


def label_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """ORM lookups on the effective label for the label filters that are set."""
    lookups: dict[str, Any] = {}
    if "verdict" in filters:
        lookups["effective_label__verdict"] = filters["verdict"]
    if "source" in filters:
        lookups["effective_label__verdict_source__in"] = SOURCES[filters["source"]]
    if "category" in filters:
        lookups["effective_label__error_category"] = filters["category"]
    for name, field in FLAGS.items():
        if name in filters:
            lookups[f"effective_label__{field}"] = filters[name] == "yes"
    return lookups


def project_trajectories(project: Project, filters: dict[str, Any]) -> QuerySet[Trajectory]:
    """The project's trajectories in id order, filtered, each marked `has_gold` and carrying
    its effective label (None where it has none)."""
    gold = Annotation.objects.filter(trajectory=OuterRef("pk"), source=Annotation.Source.GOLD)
    trajectories = (
        Trajectory.objects.filter(project=project)
        .select_related("task", "effective_label")
        .only(
            "external_id",
            "agent_model",
            "agent_role",
            "success",
            "reward",
            "step_count",
            "task__external_id",
            "effective_label__verdict",
            "effective_label__verdict_source",
            "effective_label__error_category",
            "effective_label__error_category_source",
            "effective_label__has_human",
            "effective_label__humans_disagree",
            "effective_label__judge_disagrees",
        )
        .annotate(has_gold=Exists(gold))
        .filter(**label_filters(filters))
        .order_by("id")
    )
    if "task" in filters:
        trajectories = trajectories.filter(task__external_id=filters["task"])
    if "model" in filters:
        trajectories = trajectories.filter(agent_model=filters["model"])
    if "role" in filters:
        trajectories = trajectories.filter(agent_role=filters["role"])
    if "outcome" in filters:
        trajectories = trajectories.filter(**OUTCOMES[filters["outcome"]])
    if "q" in filters:
        trajectories = search_steps(trajectories, filters["q"])
    if "after" in filters:
        trajectories = trajectories.filter(id__gt=filters["after"])
    return trajectories


# Distinct models by walking the (project, agent_model) index one value at a time: a plain
# DISTINCT reads every row of the project (30-40 ms at 100k runs), this reads one per model.
AGENT_MODELS_SQL = """
WITH RECURSIVE models(agent_model) AS (
    SELECT MIN(agent_model) FROM curation_trajectory WHERE project_id = %(project)s
    UNION ALL
    SELECT (SELECT MIN(t.agent_model) FROM curation_trajectory t
            WHERE t.project_id = %(project)s AND t.agent_model > models.agent_model)
    FROM models WHERE models.agent_model IS NOT NULL
)
SELECT agent_model FROM models WHERE agent_model IS NOT NULL AND agent_model <> ''
"""


def agent_models(project: Project) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(AGENT_MODELS_SQL, {"project": project.pk})
        return [row[0] for row in cursor.fetchall()]


def filter_form(data: Any, project: Project) -> TrajectoryFilter:
    """The list filter of `project`, its choices filled from the project, bound to `data`."""
    return TrajectoryFilter(data, agent_models(project), project.categories)


def filters_from_pairs(project: Project, pairs: Sequence[str]) -> dict[str, Any]:
    """Command-line `--filter KEY=VALUE` options as list filters; ValueError says what is
    wrong with them."""
    data = QueryDict(mutable=True)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--filter {pair!r}: expected KEY=VALUE")
        data[key] = value
    form = filter_form(data, project)
    filters = form.filters()
    if form.errors:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        raise ValueError(f"bad filter: {problems}")
    return filters


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    form = filter_form(request.GET, project)
    filters = form.filters()
    role = role_in(request.user, project)
    context = {
        "project": project,
        "form": form,
        **keyset_page(project_trajectories(project, filters), "after" not in filters),
        "can_import": role in IMPORT_ROLES,
        "can_review": role in REVIEW_ROLES,
        "can_manage": role in MANAGE_ROLES,
    }
    return render(request, "annotate/project_detail.html", context)


urls = [path("p/<slug:slug>/", project_detail, name="project-detail")]
