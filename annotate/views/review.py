"""The review page: one trajectory with its steps, every judgement of it and its step scores.

It needs a login; a trajectory outside `visible_projects` is a 404. It runs a fixed number of
SQL queries however many steps, annotations and scores it shows: the trajectory with its
project, task, tools, effective label and adjudication in one, then steps, annotations and
step scores in one each (plus what the annotation form needs).

Steps and score cells are rendered here rather than in a template: a template costs several
microseconds per variable, which at 300 steps was most of the page's time. Each step is
`<li id="step-N" class="step role-R [critical] [root]" data-step="N">`; every value from the
trajectory is escaped (`esc`) or goes through the markdown renderer, which escapes first.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from html import escape as esc  # Django's escape, minus its lazy-string wrapper (hot path)
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path
from django.utils.safestring import SafeString, mark_safe

from annotate.markdown import render_markdown
from annotate.models import Adjudication, Annotation, EffectiveLabel
from annotate.views.annotation import form_context
from curation.models import Step, Trajectory
from curation.permissions import MANAGE_ROLES, REVIEW_ROLES, role_in, visible_projects

LONG_CONTENT = 2000  # characters; longer step content is folded into a <details>
TOOL_FOLD_CHARS = 600  # a tool result longer than this (or TOOL_FOLD_LINES) starts collapsed
TOOL_FOLD_LINES = 12
MARKDOWN_ROLES = {Step.Role.ASSISTANT, Step.Role.USER}
SOURCE_RANK = {source: rank for rank, source in enumerate(("adjudicated", *Annotation.Source))}
SCORE_TONES = 5  # score cells are coloured in this many steps from low to high
SCORE_FIELDS = ("step_index", "source", "source_name", "label", "score")
ScoreRow = tuple[int, str, str, str, float | None]


def pretty_json(value: Any) -> str:
    """Indented JSON; a string (malformed tool arguments, kept as written) stays as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass
class Judgement:
    """One annotation or the adjudication, as a card and as step markers."""

    key: str  # the card's element id
    who: str  # short name for markers: a username, "gold", a judge's name
    source: str
    source_name: str
    verdict: str
    first_critical_step: int | None
    root_cause_step: int | None
    error_category: str
    rationale: str
    confidence: float | None = None
    responsible_agent: str = ""


@dataclass
class Marker:
    kind: str  # "critical" or "root"
    judgement: Judgement


@dataclass
class ShownStep:
    step: Step
    html: SafeString  # the whole <li>, see step_html


@dataclass
class ScoreStrip:
    name: str
    cells: SafeString  # one link per step; built here, 600 template cells would cost ~20 ms


def annotation_judgement(annotation: Annotation) -> Judgement:
    if annotation.author is not None:
        who = annotation.author.get_username()
    elif annotation.source == Annotation.Source.GOLD:
        who = "gold"
    else:
        who = annotation.source_name or annotation.source
    return Judgement(
        key=f"annotation-{annotation.pk}",
        who=who,
        source=annotation.source,
        source_name=annotation.source_name,
        verdict=annotation.verdict,
        first_critical_step=annotation.first_critical_step,
        root_cause_step=annotation.root_cause_step,
        error_category=annotation.error_category,
        rationale=annotation.rationale,
        confidence=annotation.confidence,
        responsible_agent=annotation.responsible_agent,
    )


def adjudication_judgement(adjudication: Adjudication) -> Judgement:
    reviewer = adjudication.reviewer.get_username() if adjudication.reviewer else ""
    return Judgement(
        key="adjudication",
        who="adjudicated",
        source="adjudicated",
        source_name=reviewer,
        verdict=adjudication.verdict,
        first_critical_step=adjudication.first_critical_step,
        root_cause_step=adjudication.root_cause_step,
        error_category=adjudication.error_category,
        rationale=adjudication.rationale,
    )


def judgements_of(trajectory: Trajectory) -> list[Judgement]:
    """The adjudication and the submitted annotations, adjudication and gold first."""
    annotations = trajectory.annotations.filter(status=Annotation.Status.SUBMITTED)
    judgements = [annotation_judgement(a) for a in annotations.select_related("author")]
    if adjudication := getattr(trajectory, "adjudication", None):
        judgements.append(adjudication_judgement(adjudication))
    return sorted(judgements, key=lambda j: SOURCE_RANK.get(j.source, len(SOURCE_RANK)))


def critic_suggestion(judgements: list[Judgement]) -> Judgement | None:
    """The latest suggestion of the learned step critic: a judge's judgement without a
    verdict (only the critic backend may leave it out). Shown as a suggestion, never filled
    into the annotator's own label."""
    suggestions = [
        j
        for j in judgements
        if j.source == Annotation.Source.JUDGE
        and not j.verdict
        and j.first_critical_step is not None
    ]
    return max(suggestions, key=lambda j: int(j.key.removeprefix("annotation-")), default=None)


def markers_by_step(judgements: list[Judgement]) -> dict[int, list[Marker]]:
    markers: dict[int, list[Marker]] = defaultdict(list)
    for judgement in judgements:
        if judgement.first_critical_step is not None:
            markers[judgement.first_critical_step].append(Marker("critical", judgement))
        if judgement.root_cause_step is not None:
            markers[judgement.root_cause_step].append(Marker("root", judgement))
    return markers


def preview(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def content_html(step: Step, critical: bool) -> str:
    """The step's content: markdown for user and assistant text, preformatted otherwise; a tool
    result in a <details> (collapsed when long), other long content folded with a preview.
    A critical step starts unfolded."""
    content = step.content
    if not content:
        return ""
    if step.role == Step.Role.TOOL:
        folded = len(content) > TOOL_FOLD_CHARS or content.count("\n") >= TOOL_FOLD_LINES
        return (
            f'<details class="tool-result"{"" if folded and not critical else " open"}>'
            f"<summary>Result · {len(content)} characters"
            f'<span class="preview">: {esc(preview(content, 120))}</span></summary>'
            f'<pre class="text">{esc(content)}</pre></details>'
        )
    if step.role in MARKDOWN_ROLES:
        body = f'<div class="md">{render_markdown(content)}</div>'
    else:
        body = f'<pre class="text">{esc(content)}</pre>'
    if len(content) <= LONG_CONTENT:
        return body
    return (
        f'<details class="long"{" open" if critical else ""}><summary>{len(content)} characters'
        f'<span class="preview">: {esc(preview(content, 160))}</span></summary>{body}</details>'
    )


def marker_html(marker: Marker) -> str:
    judgement = marker.judgement
    title = judgement.source + (f" · {judgement.source_name}" if judgement.source_name else "")
    symbol = "⚑ critical" if marker.kind == "critical" else "◆ root"
    return (
        f'<a class="marker {marker.kind} source-{esc(judgement.source)}" href="#{judgement.key}"'
        f' title="{esc(title)}">{symbol}: {esc(judgement.who)}</a>'
    )


def call_html(call: dict) -> str:
    """A tool call as its name, its id and its pretty-printed arguments."""
    call_id = call.get("id")
    shown_id = f' <span class="muted">id <code>{esc(str(call_id))}</code></span>' if call_id else ""
    return (
        '<div class="call"><span class="label">Tool call</span> '
        f'<code class="call-name">{esc(str(call.get("name") or ""))}</code>{shown_id}'
        f"<pre>{esc(pretty_json(call.get('arguments', {})))}</pre></div>"
    )


def step_html(step: Step, label: EffectiveLabel | None, markers: list[Marker]) -> SafeString:
    """The step's <li>. Every value from the trajectory goes through `esc` (or the markdown
    renderer, which escapes first); the rest are our own class names and integers."""
    n = step.index
    critical = label is not None and label.first_critical_step == n
    root = label is not None and label.root_cause_step == n
    classes = f"step role-{esc(step.role)}" + " critical" * critical + " root" * root
    parts = [
        f'<li id="step-{n}" class="{classes}" data-step="{n}"><header>'
        f'<a class="index" href="#step-{n}">#{n}</a> <span class="role">{esc(step.role)}</span>'
    ]
    if step.name:
        parts.append(f' <strong class="name">{esc(step.name)}</strong>')
    if step.tool_call_id:
        parts.append(
            f' <span class="muted">tool_call_id <code>{esc(step.tool_call_id)}</code></span>'
        )
    if markers:
        parts.append(f' <span class="markers">{"".join(marker_html(m) for m in markers)}</span>')
    parts.append("</header>")
    if step.reasoning:
        parts.append(
            '<div class="reasoning"><span class="label">Reasoning</span>'
            f'<pre class="text">{esc(step.reasoning)}</pre></div>'
        )
    parts.append(content_html(step, critical))
    parts.extend(call_html(call) for call in step.tool_calls if isinstance(call, dict))
    if step.metadata:
        parts.append(
            '<details class="json"><summary>Step metadata</summary>'
            f"<pre>{esc(pretty_json(step.metadata))}</pre></details>"
        )
    parts.append("</li>")
    return mark_safe("".join(parts))  # every piece above is escaped or our own markup


def score_tone(score: float, low: float, high: float) -> str:
    """score-0 (worst) to score-4 (best): scores in [0, 1] as they are, others min-max scaled."""
    if low < 0 or high > 1:
        score = (score - low) / (high - low) if high > low else 0.5
    return f"score-{min(int(score * SCORE_TONES), SCORE_TONES - 1)}"


def score_cell(index: int, label: str, score: float | None, low: float, high: float) -> str:
    """A cell coloured by its label, else by its score; the title says both."""
    if label:
        tone = f"label-{esc(label)}"
    else:
        tone = score_tone(score, low, high) if score is not None else ""
    title = f"step {index}" + (f": {label}" if label else "")
    if score is not None:
        title += f" {score:.3g}"
    return f'<a class="cell {tone}" href="#step-{index}" title="{esc(title)}"></a>'


def score_strips(rows: list[ScoreRow], indexes: list[int]) -> list[ScoreStrip]:
    """One strip per scorer (source and name), one cell per step; a label colours a cell
    before a score does. A step scored twice by one scorer shows the latest."""
    by_scorer: dict[str, dict[int, tuple[str, float | None]]] = defaultdict(dict)
    for index, source, source_name, label, score in rows:
        by_scorer[source_name or source][index] = (label, score)
    strips = []
    for name, by_step in by_scorer.items():
        values = [score for _, score in by_step.values() if score is not None]
        low, high = min(values, default=0.0), max(values, default=1.0)
        cells = (
            score_cell(i, *by_step[i], low, high)
            if i in by_step
            else f'<a class="cell" href="#step-{i}" title="step {i}"></a>'
            for i in indexes
        )
        strips.append(ScoreStrip(name, SafeString("".join(cells))))
    return strips


def effective_fields(label: EffectiveLabel | None) -> list[tuple[str, Any, str, bool]]:
    """(field, value, source, is a step) of the effective label, for its card."""
    if label is None:
        return []
    return [
        ("Verdict", label.verdict, label.get_verdict_source_display(), False),
        (
            "First critical step",
            label.first_critical_step,
            label.get_first_critical_step_source_display(),
            True,
        ),
        (
            "Root cause step",
            label.root_cause_step,
            label.get_root_cause_step_source_display(),
            True,
        ),
        ("Category", label.error_category, label.get_error_category_source_display(), False),
    ]


def json_sections(trajectory: Trajectory) -> list[tuple[str, str]]:
    """The trajectory's JSON blobs worth a look, as (title, indented JSON), empty ones left out."""
    sections = [
        ("Task reference", trajectory.task.reference),
        ("Outcome info", trajectory.outcome_info),
        (f"Tools ({len(trajectory.tools)})", trajectory.tools),
        ("Metadata", trajectory.metadata),
    ]
    return [(title, pretty_json(value)) for title, value in sections if value]


@login_required
def trajectory_detail(request: HttpRequest, pk: int) -> HttpResponse:
    trajectory = get_object_or_404(
        Trajectory.objects.select_related(
            "project", "task", "toolset", "effective_label", "adjudication__reviewer"
        ),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    label = getattr(trajectory, "effective_label", None)
    role = role_in(request.user, trajectory.project)
    judgements = judgements_of(trajectory)
    markers = markers_by_step(judgements)
    steps = [
        ShownStep(step, step_html(step, label, markers.get(step.index, [])))
        for step in trajectory.steps.all()
    ]
    context = {
        "trajectory": trajectory,
        "judgements": judgements,
        "effective": label,
        "effective_fields": effective_fields(label),
        "steps": steps,
        "score_strips": score_strips(
            list(trajectory.step_scores.values_list(*SCORE_FIELDS)), [s.step.index for s in steps]
        ),
        "json_sections": json_sections(trajectory),
        "critic_suggestion": critic_suggestion(judgements),
        "can_review": role in REVIEW_ROLES,
        "can_manage": role in MANAGE_ROLES,
    }
    context.update(form_context(request, trajectory))
    return render(request, "annotate/trajectory_detail.html", context)


urls = [path("t/<int:pk>/", trajectory_detail, name="trajectory-detail")]
