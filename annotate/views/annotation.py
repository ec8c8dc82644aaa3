"""The annotation form of the review page: one human annotation per user and trajectory.

Drafts autosave; a submit checks the labelling rules, refreshes the effective label and, when
the page came from a queue, marks the queue assignment done. Every save names the version it
was made from and is refused, never merged, when someone saved the annotation since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods

from annotate import effective, history, queues
from annotate.forms import STEP_LABEL_PREFIX, STEP_LABELS, AnnotationForm, initial_from
from annotate.models import Annotation, Queue
from curation.models import Trajectory
from curation.permissions import visible_projects

TEMPLATE = "annotate/_annotation_form.html"
STALE = "Someone saved this annotation since you opened it; reload to see their version."


@dataclass
class State:
    """The line under the form's title: what the last save did."""

    message: str = ""
    kind: str = ""  # "", "saved", "error" or "stale"


def own_annotation(trajectory: Trajectory, user: AbstractBaseUser) -> Annotation | None:
    return Annotation.objects.filter(trajectory=trajectory, author=user).first()


def page_queue(trajectory: Trajectory, raw_id: str | None) -> Queue | None:
    """The project's queue the page was opened from (`?queue=<id>`), if any."""
    if not raw_id or not raw_id.isdigit():
        return None
    return Queue.objects.filter(pk=int(raw_id), project_id=trajectory.project_id).first()


def save(
    trajectory: Trajectory, user: AbstractBaseUser, version: int, values: dict[str, Any]
) -> Annotation | None:
    """Write the user's annotation if it is still at `version` (0: none yet), bump its version
    and record the change in its history, all in one transaction; None, with nothing written,
    if someone saved it since."""
    try:
        with transaction.atomic():
            if version == 0:
                annotation = Annotation.objects.create(
                    trajectory=trajectory,
                    author=user,
                    source=Annotation.Source.HUMAN,
                    version=1,
                    **values,
                )
                history.record_annotation(annotation, None, user)
                return annotation
            mine = Annotation.objects.filter(trajectory=trajectory, author=user)
            before = mine.filter(version=version).first()
            # The update matches only the version read above, so `before` is what it replaces.
            if before is None or not mine.filter(version=version).update(
                **values, version=version + 1, updated_at=timezone.now()
            ):
                return None
            annotation = mine.get()
            history.record_annotation(annotation, history.values_of(before), user)
            return annotation
    except IntegrityError:  # another session created it first
        return None


def saved_state(annotation: Annotation | None) -> State:
    if annotation is None:
        return State()
    at = timezone.localtime(annotation.updated_at).strftime("%H:%M:%S")
    if annotation.status == Annotation.Status.SUBMITTED:
        return State(f"Submitted {at}; change it and submit again to update it.", "saved")
    return State(f"Draft saved {at}", "saved")


def _options(current: str) -> str:
    choices = "".join(
        f'<option value="{c}"{" selected" if c == current else ""}>{c}</option>'
        for c in STEP_LABELS
    )
    return f'<option value="">—</option>{choices}'


def step_label_grid(form: AnnotationForm, annotation: Annotation | None) -> SafeString:
    """One select per step, labelled from the posted form or the stored annotation.

    Built here rather than in the template: at 300 steps x 5 options a template loop costs
    about 55 ms of the page. Only step numbers and the fixed choices are written out.
    """
    if form.is_bound:
        labels = {
            key.removeprefix(STEP_LABEL_PREFIX): value
            for key, value in form.data.items()
            if key.startswith(STEP_LABEL_PREFIX)
        }
    else:
        labels = annotation.step_labels if annotation else {}
    options = {current: _options(current) for current in ("", *STEP_LABELS)}
    rows = (
        f'<label><a href="#step-{index}">#{index}</a> <select name="{STEP_LABEL_PREFIX}{index}">'
        f"{options.get(labels.get(str(index), ''), options[''])}</select></label>"
        for index in range(form.step_count)
    )
    return mark_safe("".join(rows))  # noqa: S308  (integers and fixed choices only)


def context_for(
    trajectory: Trajectory,
    form: AnnotationForm,
    annotation: Annotation | None,
    queue: Queue | None,
    state: State,
    version: int,
) -> dict[str, Any]:
    """What templates/annotate/_annotation_form.html needs."""
    url = reverse("annotation-form", kwargs={"pk": trajectory.pk})
    submitted = annotation is not None and annotation.status == Annotation.Status.SUBMITTED
    return {
        "annotation_form": form,
        "annotation_url": f"{url}?queue={queue.pk}" if queue else url,
        "annotation_queue": queue,
        "annotation_state": state,
        "annotation_version": version,
        "annotation_submitted": submitted,
        "annotation_categories": [
            (str(n) if n <= 9 else "", entry["name"], entry.get("description", ""))
            for n, entry in enumerate(trajectory.project.error_taxonomy, start=1)
            if isinstance(entry, dict)
        ],
        "annotation_verdicts": Annotation.Verdict.values,
        "step_label_grid": step_label_grid(form, annotation),
    }


def form_context(request: HttpRequest, trajectory: Trajectory) -> dict[str, Any]:
    """The form as the review page shows it: the user's annotation as last saved."""
    annotation = own_annotation(trajectory, request.user)
    form = AnnotationForm(trajectory, initial=initial_from(annotation))
    queue = page_queue(trajectory, request.GET.get("queue"))
    version = annotation.version if annotation else 0
    context = context_for(trajectory, form, annotation, queue, saved_state(annotation), version)
    # For the review page's history; lazy, so the form partial alone runs no query for it.
    return {**context, "label_history": history.LabelHistory(trajectory, request.user)}


def finish_submit(request: HttpRequest, trajectory: Trajectory, queue: Queue | None) -> None:
    effective.refresh([trajectory.pk])
    if queue is not None:
        queues.complete(queue, request.user, trajectory)


@login_required
@require_http_methods(["GET", "POST"])
def annotation_form(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the form partial, fresh from the database. POST: save a draft (autosave; answers
    with the state line only) or submit (`intent=submit`; answers with the whole form)."""
    trajectory = get_object_or_404(
        Trajectory.objects.select_related("project"),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    if request.method == "GET":
        return render(request, TEMPLATE, form_context(request, trajectory))
    submitting = request.POST.get("intent") == "submit"
    queue = page_queue(trajectory, request.GET.get("queue"))
    annotation = own_annotation(trajectory, request.user)
    form = AnnotationForm(trajectory, request.POST, submitting=submitting)
    state, version, saved = State(), 0, None
    if not form.is_valid():
        version = form.cleaned_data.get("version", 0)
        state = State("Not saved: fix the marked fields.", "error")
    elif not submitting and annotation and annotation.status == Annotation.Status.SUBMITTED:
        version = form.cleaned_data["version"]
        state = State("Already submitted: submit again to change it.", "error")
    else:
        status = Annotation.Status.SUBMITTED if submitting else Annotation.Status.DRAFT
        version = form.cleaned_data["version"]
        saved = save(trajectory, request.user, version, {**form.values(), "status": status})
        state = saved_state(saved) if saved else State(STALE, "stale")
    if saved is not None:
        annotation, version = saved, saved.version
        if submitting:
            finish_submit(request, trajectory, queue)
            form = AnnotationForm(trajectory, initial=initial_from(saved))
    context = context_for(trajectory, form, annotation, queue, state, version)
    if submitting:
        return render(request, TEMPLATE, context)
    response = render(request, TEMPLATE, {**context, "state_only": True})
    response["HX-Retarget"] = "#annotation-state"
    response["HX-Reswap"] = "outerHTML"
    return response


urls = [path("t/<int:pk>/annotation/", annotation_form, name="annotation-form")]
