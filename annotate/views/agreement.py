"""The agreement page of a project, or of one of its queues: human-human agreement and where
the effective labels put errors. Any project member may see it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path

from annotate.agreement import Judgement, agreement, bars, category_counts, position_counts
from annotate.models import Annotation, EffectiveLabel, Queue, QueueItem
from curation.models import Project
from curation.permissions import visible_projects

HUMAN_SOURCES = (Annotation.Source.HUMAN, Annotation.Source.GOLD)


def human_judgements(project: Project, queue: Queue | None) -> list[Judgement]:
    """Submitted human and gold labels of the project's (or queue's) trajectories that have at
    least two of them; a gold label's annotator is its source name."""
    labels = Annotation.objects.filter(
        trajectory__project=project,
        source__in=HUMAN_SOURCES,
        status=Annotation.Status.SUBMITTED,
    )
    if queue is not None:
        labels = labels.filter(trajectory_id__in=queue_trajectories(queue))
    shared = labels.values("trajectory_id").annotate(n=Count("id")).filter(n__gte=2)
    rows = labels.filter(trajectory_id__in=shared.values("trajectory_id")).values_list(
        "trajectory_id",
        "source",
        "author__username",
        "source_name",
        "verdict",
        "first_critical_step",
        "error_category",
    )
    return [
        Judgement(
            item=item,
            annotator=username if source == Annotation.Source.HUMAN else f"{name or 'gold'} (gold)",
            verdict=verdict,
            critical_step=step,
            category=category,
        )
        for item, source, username, name, verdict, step, category in rows
    ]


def queue_trajectories(queue: Queue) -> QuerySet:
    return QueueItem.objects.filter(queue=queue).values("trajectory_id")


def effective_labels(project: Project, queue: Queue | None) -> QuerySet[EffectiveLabel]:
    labels = EffectiveLabel.objects.filter(trajectory__project=project)
    if queue is not None:
        labels = labels.filter(trajectory_id__in=queue_trajectories(queue))
    return labels


def selected_queue(request: HttpRequest, project: Project) -> Queue | None:
    """The queue named by `?queue=`; a bad id or another project's queue is a 404."""
    value = request.GET.get("queue", "")
    if not value:
        return None
    if not value.isdigit():
        raise Http404("No such queue.")
    return get_object_or_404(Queue, project=project, pk=int(value))


@login_required
def agreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    queue = selected_queue(request, project)
    labels = effective_labels(project, queue)
    categories = dict(
        labels.exclude(error_category="")
        .values_list("error_category")
        .annotate(n=Count("pk"))
        .order_by()
    )
    positions = position_counts(
        labels.filter(first_critical_step__isnull=False, trajectory__step_count__gt=0)
        .values_list("first_critical_step", "trajectory__step_count")
        .iterator()
    )
    report = agreement(human_judgements(project, queue))
    context = {
        "project": project,
        "queue": queue,
        "queues": project.queues.only("name").order_by("name", "pk"),
        "report": report,
        "rates": [
            ("First critical step, exact", report.critical_step_exact),
            ("First critical step, within one step", report.critical_step_within_one),
            ("Error category", report.category),
        ],
        "category_bars": bars(category_counts(categories, project.categories)),
        "category_total": sum(categories.values()),
        "position_bars": bars(positions),
        "position_total": sum(count for _, count in positions),
    }
    return render(request, "annotate/agreement.html", context)


urls = [path("p/<slug:slug>/agreement/", agreement_page, name="agreement")]
