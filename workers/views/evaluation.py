"""The judge evaluation page: a judge or panel against gold, humans or adjudications, as a
table with bootstrap intervals, a bar chart of the rates and the verdict confusion matrix."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from workers.judging.compare import REFERENCES, compare
from workers.judging.evaluation import Rate
from workers.views.judges import visible_project

CHART_WIDTH = 300  # pixels for a rate of 100%


class EvaluationForm(forms.Form):
    judge = forms.ChoiceField()
    against = forms.ChoiceField(choices=[(r, r) for r in REFERENCES], initial="gold")

    def __init__(self, data: object, names: list[str]) -> None:
        super().__init__(data)
        self.fields["judge"].choices = [(n, n) for n in names]


def bar(name: str, rate: Rate) -> dict:
    """A row of the table and the chart: the rate, its interval, and pixel positions."""

    def px(value: float | None) -> int:
        return round((value or 0) * CHART_WIDTH)

    return {
        "name": name,
        "rate": rate,
        "width": px(rate.value),
        "low": px(rate.interval.low),
        "high": px(rate.interval.high),
        "has_interval": rate.interval.low is not None,
    }


@login_required
def evaluation(request: HttpRequest, slug: str) -> HttpResponse:
    project = visible_project(request, slug)
    names = [c.name for c in project.judge_configs.all()] + [
        p.name for p in project.judge_panels.all()
    ]
    form = EvaluationForm(request.GET or None, names)
    context: dict = {"project": project, "form": form, "chart_width": CHART_WIDTH}
    if form.is_bound and form.is_valid():
        result = compare(project, form.cleaned_data["judge"], form.cleaned_data["against"])
        report = result.report
        context["result"] = result
        context["bars"] = [
            bar("verdict", report.verdict),
            bar("critical step, exact", report.step_exact),
            bar("critical step, within one", report.step_within_one),
            bar("critical step, within three", report.step_within_three),
            bar("agent", report.agent),
            bar("category", report.category),
        ]
        context["confusion"] = list(zip(report.confusion_labels, report.confusion, strict=True))
    return render(request, "workers/evaluation.html", context)


urls = [path("p/<slug:slug>/judges/evaluate/", evaluation, name="judge-evaluation")]
