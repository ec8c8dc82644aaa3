"""The export page's form: kind, format and filters, checked by the same code as the API and
the command (`check_request`), its errors shown on the field they are about."""

from __future__ import annotations

from typing import Any

from django import forms

from curation.canonical import VERDICTS
from curation.exports.runner import check_request
from curation.exports.spec import KIND_OPTIONS, MIN_SOURCES, PAIRS, ExportSpec, FilterError
from curation.models import DatasetExport, Project, Trajectory

CHECKBOXES = forms.CheckboxSelectMultiple
GROUPS = {  # fieldsets of the page
    "Dataset": ("kind", "format"),
    "Which runs": (
        "tasks",
        "agent_models",
        "agent_roles",
        "verdicts",
        "min_source",
        "require_agreement",
        "categories",
    ),
    "Scores and length": (
        "step_score_min",
        "step_score_max",
        "min_steps",
        "max_steps",
        "min_length",
        "max_length",
        "tokenizer",
    ),
    "Rows and split": ("dedup", "test_fraction", "split_seed", "limit"),
    "Options of one kind": ("loss_after_branch", "pairs", "step_threshold"),
}
HELP_LENGTH = "Training text in tokens of the tokenizer below, else in characters."


class ExportForm(forms.Form):
    kind = forms.ChoiceField(choices=DatasetExport.Kind.choices)
    format = forms.ChoiceField(choices=DatasetExport.Format.choices)
    tasks = forms.CharField(required=False, help_text="Task ids, comma separated; empty: all.")
    agent_models = forms.MultipleChoiceField(required=False, widget=CHECKBOXES)
    agent_roles = forms.MultipleChoiceField(
        required=False, choices=Trajectory.AgentRole.choices, widget=CHECKBOXES
    )
    verdicts = forms.MultipleChoiceField(
        required=False,
        choices=[(v, v) for v in VERDICTS],
        widget=CHECKBOXES,
        help_text="Effective verdicts; empty: all the kind can use.",
    )
    min_source = forms.ChoiceField(
        required=False,
        label="Minimum verdict source",
        choices=[("", "any")] + [(s, s) for s in MIN_SOURCES],
    )
    require_agreement = forms.BooleanField(
        required=False, help_text="Leave out runs whose humans disagree or a judge disagrees."
    )
    categories = forms.MultipleChoiceField(
        required=False, label="Error categories", widget=CHECKBOXES
    )
    step_score_min = forms.FloatField(required=False, help_text="Lowest step score at least.")
    step_score_max = forms.FloatField(required=False, help_text="Highest step score at most.")
    min_steps = forms.IntegerField(required=False, min_value=0)
    max_steps = forms.IntegerField(required=False, min_value=0)
    min_length = forms.IntegerField(required=False, min_value=0, help_text=HELP_LENGTH)
    max_length = forms.IntegerField(required=False, min_value=0, help_text=HELP_LENGTH)
    tokenizer = forms.CharField(required=False, help_text="A local tokenizer folder or name.")
    dedup = forms.BooleanField(required=False, initial=True, label="Remove exact duplicates")
    test_fraction = forms.FloatField(
        initial=0.1, min_value=0, max_value=0.99, help_text="Share of tasks in the test split."
    )
    split_seed = forms.CharField(required=False)
    limit = forms.IntegerField(required=False, min_value=1, help_text="At most this many rows.")
    loss_after_branch = forms.BooleanField(
        required=False, help_text="SFT: corrections train only on the teacher's steps."
    )
    pairs = forms.MultipleChoiceField(
        required=False,
        choices=[(p, p) for p in PAIRS],
        initial=list(PAIRS),
        widget=CHECKBOXES,
        help_text="Preference: which pairs to make.",
    )
    step_threshold = forms.FloatField(
        initial=0.5, required=False, help_text="Stepwise: a step score this high is good."
    )

    def __init__(self, project: Project, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        models = (
            Trajectory.objects.filter(project=project)
            .exclude(agent_model="")
            .values_list("agent_model", flat=True)
            .distinct()
            .order_by("agent_model")
        )
        self.fields["agent_models"].choices = [(m, m) for m in models]
        self.fields["categories"].choices = [(c, c) for c in project.categories]
        self.spec: ExportSpec | None = None

    @property
    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(title, [self[name] for name in names]) for title, names in GROUPS.items()]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        kind = data["kind"]
        filters = {
            name: value
            for name, value in data.items()
            if name not in ("kind", "format") and KIND_OPTIONS.get(name, kind) == kind
        }
        try:
            self.spec = check_request(self.project, kind, data["format"], filters)
        except FilterError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.reason)
        return data
