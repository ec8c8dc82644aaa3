"""Correction pages: the project's corrections with recovery rates, starting a batch from a
list filter (or one trajectory), a batch's progress, and one correction beside its original
from the branch step, where reviewers can overrule the verifier. Membership to see (404),
researcher or admin to start (403), reviewer or admin to overrule (403)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from annotate.views.lists import filter_form, project_trajectories
from annotate.views.review import step_html
from curation.models import Project, Trajectory
from curation.permissions import can_manage, can_review, visible_projects
from workers.corrections import environments, report, runner
from workers.models import Correction, CorrectionBatch, JudgeConfig, TeacherConfig
from workers.views.judges import managed_project, visible_project

LISTED = 50


class StartForm(forms.Form):
    teacher = forms.ModelChoiceField(queryset=TeacherConfig.objects.none())
    mode = forms.ChoiceField(choices=CorrectionBatch.Mode.choices, initial="step")
    environment = forms.CharField(
        initial="replay",
        help_text="Rollouts: replay, simulated, python:dotted.path.Class or an http(s):// URL.",
    )
    guidance = forms.BooleanField(required=False, help_text="A reflector writes advice first.")
    reflector = forms.ModelChoiceField(queryset=TeacherConfig.objects.none(), required=False)
    simulator = forms.ModelChoiceField(queryset=TeacherConfig.objects.none(), required=False)
    verifier = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.none(),
        required=False,
        help_text="The judge that accepts or rejects each correction (empty: review by hand).",
    )
    max_steps = forms.IntegerField(min_value=1, max_value=200, initial=20)
    filter = forms.CharField(
        required=False,
        help_text="The trajectory list's filter as a query string, e.g. verdict=failure.",
    )
    trajectory = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, data: Any, project: Project, initial: dict | None = None) -> None:
        super().__init__(data, initial=initial)
        self.project = project
        teachers = project.teachers.all()
        for name in ("teacher", "reflector", "simulator"):
            self.fields[name].queryset = teachers
        self.fields["verifier"].queryset = project.judge_configs.all()

    def clean_environment(self) -> str:
        try:
            return environments.validate_name(self.cleaned_data["environment"].strip())
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def trajectories(self) -> Any:
        if self.cleaned_data.get("trajectory"):
            return self.project.trajectories.filter(pk=self.cleaned_data["trajectory"])
        listed = filter_form(QueryDict(self.cleaned_data.get("filter") or ""), self.project)
        filters = listed.filters()
        if listed.errors:
            self.add_error("filter", "Bad filter: " + "; ".join(listed.errors))
            return None
        return project_trajectories(self.project, filters)


@login_required
def correction_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = visible_project(request, slug)
    corrections = (
        Correction.objects.filter(batch__project=project)
        .select_related("batch__teacher", "source")
        .order_by("-id")
    )
    status = request.GET.get("status", "")
    if status in Correction.Status.values:
        corrections = corrections.filter(status=status)
    context = {
        "project": project,
        "corrections": corrections[:LISTED],
        "status": status,
        "statuses": Correction.Status.choices,
        "tables": report.recovery(project),
        "batches": CorrectionBatch.objects.filter(project=project).select_related("teacher")[:10],
        "can_manage": can_manage(request.user, project),
        "teachers": project.teachers.all(),
    }
    return render(request, "workers/correction_list.html", context)


@login_required
def correction_start(request: HttpRequest, slug: str) -> HttpResponse:
    project = managed_project(request, slug)
    initial = {"trajectory": request.GET.get("trajectory"), "filter": request.GET.get("filter", "")}
    form = StartForm(request.POST if request.method == "POST" else None, project, initial)
    if form.is_bound and form.is_valid():
        trajectories = form.trajectories()
        if trajectories is not None:
            data = form.cleaned_data
            batch = runner.start_batch(
                data["teacher"],
                trajectories,
                mode=data["mode"],
                environment=data["environment"],
                guidance=data["guidance"],
                max_steps=data["max_steps"],
                verifier=data["verifier"],
                reflector=data["reflector"],
                simulator=data["simulator"],
                user=request.user,
            )
            return redirect("correction-batch", pk=batch.pk)
    single = None
    if str(chosen := form["trajectory"].value() or "").isdecimal():  # from the query string
        single = Trajectory.objects.filter(project=project, pk=int(chosen)).first()
    context = {"project": project, "form": form, "single": single}
    return render(request, "workers/correction_start.html", context)


@login_required
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_object_or_404(
        CorrectionBatch.objects.select_related("teacher", "project", "verifier"),
        pk=pk,
        project__in=visible_projects(request.user),
    )
    context = {"batch": batch, "project": batch.project, "progress": runner.progress(batch)}
    if request.headers.get("HX-Request"):
        return render(request, "workers/_correction_batch_status.html", context)
    context["corrections"] = batch.corrections.select_related("source").order_by("id")[:LISTED]
    return render(request, "workers/correction_batch.html", context)


def visible_correction(request: HttpRequest, pk: int) -> Correction:
    return get_object_or_404(
        Correction.objects.select_related("batch__teacher", "batch__project", "source", "result"),
        pk=pk,
        batch__project__in=visible_projects(request.user),
    )


@login_required
def correction_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Original and corrected side by side from the branch step, the prefix folded."""
    correction = visible_correction(request, pk)
    k = correction.intervention_step
    original = list(correction.source.steps.filter(index__gte=k).order_by("index"))
    corrected = (
        list(correction.result.steps.filter(index__gte=k).order_by("index"))
        if correction.result
        else []
    )
    project = correction.batch.project
    context = {
        "correction": correction,
        "project": project,
        "original": [step_html(s, None, []) for s in original],
        "corrected": [step_html(s, None, []) for s in corrected],
        "can_review": can_review(request.user, project),
    }
    return render(request, "workers/correction_detail.html", context)


@login_required
@require_POST
def correction_override(request: HttpRequest, pk: int) -> HttpResponse:
    correction = visible_correction(request, pk)
    if not can_review(request.user, correction.batch.project):
        raise PermissionDenied("Reviewers and admins decide over a verifier.")
    if correction.result_id is None:
        raise PermissionDenied("Only a generated correction can be accepted or rejected.")
    decision = request.POST.get("decision")
    if decision not in ("accept", "reject"):
        return HttpResponseBadRequest("The decision is accept or reject.")
    runner.override(
        correction, decision == "accept", request.user, request.POST.get("note", "")[:500]
    )
    return redirect("correction-detail", pk=correction.pk)


urls = [
    path("p/<slug:slug>/corrections/", correction_list, name="correction-list"),
    path("p/<slug:slug>/corrections/new/", correction_start, name="correction-start"),
    path("correction-batches/<int:pk>/", batch_detail, name="correction-batch"),
    path("corrections/<int:pk>/", correction_detail, name="correction-detail"),
    path("corrections/<int:pk>/decide/", correction_override, name="correction-override"),
]
