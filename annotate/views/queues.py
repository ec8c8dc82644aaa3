"""Annotation queues: the project's queues, making one from a list filter, a queue's progress and
"next item". Every page needs project membership (404 otherwise); making a queue needs the admin
or researcher role and claiming needs to be on the queue's list of annotators, when it has one
(403 otherwise)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.http import urlencode

from annotate.models import Queue
from annotate.queues import claim_next, create_queue, may_claim, progress
from annotate.views.lists import filter_form, project_trajectories
from curation.models import Project
from curation.permissions import can_manage, visible_projects

MAX_OVERLAP = 10


class MemberChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.get_username()} ({obj.role})"


class QueueForm(forms.Form):
    name = forms.CharField(max_length=200)
    overlap = forms.IntegerField(
        min_value=1,
        max_value=MAX_OVERLAP,
        initial=1,
        help_text="How many annotators label each trajectory.",
    )
    order = forms.ChoiceField(
        choices=Queue.Order.choices,
        initial=Queue.Order.POSITION,
        required=False,
        help_text="Critic orders need a critic judge's suggestions on the items (active "
        "learning: label first what teaches the critic most); unjudged items come last.",
    )
    annotators = MemberChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may work on it; nobody ticked means every member of the project.",
    )

    def __init__(self, data: Any, project: Project, initial: dict[str, Any]) -> None:
        super().__init__(data, initial=initial)
        self.members = members(project)
        self.fields["annotators"].queryset = self.members

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        overlap, chosen = cleaned.get("overlap"), cleaned.get("annotators")
        pool = len(chosen) if chosen else self.members.count()
        if overlap and overlap > pool:
            raise ValidationError(
                f"An overlap of {overlap} needs at least {overlap} annotators; there are {pool}."
            )
        return cleaned


def members(project: Project) -> QuerySet:
    """The project's members, each with its `role` there."""
    users = get_user_model().objects.filter(memberships__project=project)
    return users.annotate(role=F("memberships__role")).order_by(get_user_model().USERNAME_FIELD)


def visible_queue(request: HttpRequest, pk: int) -> Queue:
    return get_object_or_404(
        Queue.objects.select_related("project").prefetch_related("annotators"),
        pk=pk,
        project__in=visible_projects(request.user),
    )


@login_required
def queue_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    queues = project.queues.prefetch_related("annotators")
    rows = [(queue, progress(queue), may_claim(queue, request.user)) for queue in queues]
    context = {"project": project, "rows": rows, "can_manage": can_manage(request.user, project)}
    return render(request, "annotate/queue_list.html", context)


@login_required
def queue_create(request: HttpRequest, slug: str) -> HttpResponse:
    """Make a queue of the trajectories the list filter in the GET parameters matches."""
    project = get_object_or_404(visible_projects(request.user), slug=slug)
    if not can_manage(request.user, project):
        raise PermissionDenied("Making queues needs the admin or researcher role in this project.")
    list_form = filter_form(request.GET, project)
    filters = {k: v for k, v in list_form.filters().items() if k != "after"}
    matching = project_trajectories(project, filters).count()
    described = ", ".join(f"{key} {value}" for key, value in filters.items())
    form = QueueForm(
        request.POST if request.method == "POST" else None,
        project=project,
        initial={"name": described or "All trajectories"},
    )
    if form.is_bound and form.is_valid():
        if list_form.errors:
            form.add_error(None, "Fix the filter on the trajectory list first.")
        elif not matching:
            form.add_error(None, "No trajectories match this filter.")
        else:
            queue = create_queue(
                project,
                form.cleaned_data["name"],
                filters,
                form.cleaned_data["overlap"],
                form.cleaned_data["annotators"],
                request.user,
                form.cleaned_data["order"] or Queue.Order.POSITION,
            )
            return redirect("queue-detail", pk=queue.pk)
    context = {
        "project": project,
        "form": form,
        "filter_form": list_form,
        "filters": filters,
        "list_query": urlencode(filters),
        "matching": matching,
    }
    return render(request, "annotate/queue_form.html", context)


@login_required
def queue_detail(request: HttpRequest, pk: int) -> HttpResponse:
    queue = visible_queue(request, pk)
    context = {
        "queue": queue,
        "project": queue.project,
        "progress": progress(queue),
        "may_claim": may_claim(queue, request.user),
        "list_query": urlencode(queue.filter),
    }
    return render(request, "annotate/queue_detail.html", context)


@login_required
def queue_next(request: HttpRequest, pk: int) -> HttpResponse:
    """Claim the user's next item and open it; safe to reload, it gives back an unfinished one."""
    queue = visible_queue(request, pk)
    if not may_claim(queue, request.user):
        raise PermissionDenied("This queue is for other annotators.")
    trajectory = claim_next(queue, request.user)
    if trajectory is None:
        return render(request, "annotate/queue_finished.html", {"queue": queue})
    url = reverse("trajectory-detail", args=[trajectory.pk])
    return redirect(f"{url}?{urlencode({'queue': queue.pk})}")


urls = [
    path("p/<slug:slug>/queues/", queue_list, name="queue-list"),
    path("p/<slug:slug>/queues/new/", queue_create, name="queue-create"),
    path("q/<int:pk>/", queue_detail, name="queue-detail"),
    path("q/<int:pk>/next/", queue_next, name="queue-next"),
]
