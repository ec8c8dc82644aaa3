"""The human annotation form: typed checks for drafts, the labelling rules on submit."""

from __future__ import annotations

from typing import Any

from django import forms

from annotate.models import Annotation, StepScore
from curation.models import Project, Trajectory

STEP_LABELS = [
    StepScore.Label.PROGRESS,
    StepScore.Label.EXPLORATION,
    StepScore.Label.NO_PROGRESS,
    StepScore.Label.REGRESSION,
]
STEP_LABEL_PREFIX = "step_label_"
EXTRA_PREFIX = "extra_"
STEP_FIELDS = ("first_critical_step", "root_cause_step")
LABEL_FIELDS = (
    "verdict",
    "first_critical_step",
    "root_cause_step",
    "error_category",
    "rationale",
    "confidence",
)


def extra_field(spec: dict[str, Any]) -> forms.Field:
    """The form field of one entry of a project's `label_schema`."""
    kind = spec.get("type")
    common: dict[str, Any] = {
        "required": False,
        "label": spec["name"],
        "help_text": spec.get("description", ""),
    }
    if kind == "numeric":
        return forms.FloatField(min_value=spec.get("min"), max_value=spec.get("max"), **common)
    if kind == "categorical":
        choices = [("", "—")] + [(str(c), str(c)) for c in spec.get("choices", [])]
        return forms.ChoiceField(choices=choices, **common)
    if kind == "boolean":
        return forms.NullBooleanField(widget=forms.NullBooleanSelect, **common)
    raise ValueError(f"label field {spec.get('name')!r} has unknown type {kind!r}")


def check_steps_in_range(form: forms.Form, data: dict[str, Any], step_count: int) -> None:
    for name in STEP_FIELDS:
        if data.get(name) is not None and data[name] >= step_count:
            form.add_error(name, f"This trajectory has steps 0 to {step_count - 1}.")


def check_label_rules(form: forms.Form, data: dict[str, Any]) -> None:
    """The rules every final label follows (annotations and adjudications alike): a failure
    names its first critical step, and the failure root is not after it (it defaults to it)."""
    critical, root = data.get("first_critical_step"), data.get("root_cause_step")
    if "first_critical_step" in form.errors:
        return
    if data.get("verdict") == Annotation.Verdict.FAILURE and critical is None:
        form.add_error("first_critical_step", "A failure needs a first critical step.")
    if root is not None and critical is None:
        form.add_error("root_cause_step", "A root cause needs a first critical step.")
    if root is not None and critical is not None and root > critical:
        form.add_error("root_cause_step", "The root cause cannot come after the critical step.")
    if critical is not None and root is None:
        data["root_cause_step"] = critical


class AnnotationForm(forms.Form):
    """One person's label of one trajectory. `version` is the annotation version the form was
    opened at (0: none yet); `submitting` turns on the rules a submitted label must meet."""

    verdict = forms.ChoiceField(
        required=False, choices=Annotation.Verdict.choices, widget=forms.RadioSelect
    )
    first_critical_step = forms.IntegerField(required=False, min_value=0)
    root_cause_step = forms.IntegerField(required=False, min_value=0)
    error_category = forms.ChoiceField(required=False, widget=forms.RadioSelect)
    rationale = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    confidence = forms.FloatField(required=False, min_value=0, max_value=1)
    version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def __init__(
        self, trajectory: Trajectory, *args: Any, submitting: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.project: Project = trajectory.project
        self.step_count = trajectory.step_count
        self.submitting = submitting
        for name in STEP_FIELDS:
            self.fields[name].widget.attrs.update(min=0, max=max(self.step_count - 1, 0))
        self.fields["confidence"].widget.attrs["step"] = "0.05"
        self.fields["error_category"].choices = [(c, c) for c in self.project.categories]
        for spec in self.project.label_schema:
            self.fields[EXTRA_PREFIX + spec["name"]] = extra_field(spec)

    @property
    def extra_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if name.startswith(EXTRA_PREFIX)]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        check_steps_in_range(self, data, self.step_count)
        data["step_labels"] = self._step_labels()
        if self.submitting:
            if not data.get("verdict") and "verdict" not in self.errors:
                self.add_error("verdict", "Choose a verdict.")
            check_label_rules(self, data)
        return data

    def _step_labels(self) -> dict[str, str]:
        """`step_label_<index>` inputs with a value, as {"index": label}."""
        labels: dict[str, str] = {}
        for key, value in self.data.items():
            if not key.startswith(STEP_LABEL_PREFIX) or not value:
                continue
            index = key.removeprefix(STEP_LABEL_PREFIX)
            if not index.isdigit() or int(index) >= self.step_count:
                self.add_error(None, f"Per-step label for a step outside the trajectory: {key}.")
            elif value not in STEP_LABELS:
                self.add_error(None, f"Step {index}: {value!r} is not a per-step label.")
            else:
                labels[str(int(index))] = value
        return labels

    def values(self) -> dict[str, Any]:
        """Annotation field values from the cleaned data."""
        data = self.cleaned_data
        values = {name: data[name] for name in LABEL_FIELDS}
        values["rationale"] = values["rationale"].strip()
        values["step_labels"] = data["step_labels"]
        values["extra"] = {
            name.removeprefix(EXTRA_PREFIX): data[name]
            for name in self.fields
            if name.startswith(EXTRA_PREFIX) and data[name] not in ("", None)
        }
        return values


def initial_from(annotation: Annotation | None) -> dict[str, Any]:
    """Form initial data for an annotation (or for none yet)."""
    if annotation is None:
        return {"version": 0}
    initial = {name: getattr(annotation, name) for name in LABEL_FIELDS}
    initial["version"] = annotation.version
    initial.update({EXTRA_PREFIX + k: v for k, v in annotation.extra.items()})
    return initial
