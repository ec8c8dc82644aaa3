"""The judge config form: a ModelForm whose JSON fields are checked for what would fail later
(secrets in plain text, a filter the list does not know, a strategy the backend cannot do)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.http import QueryDict
from django.utils.http import urlencode

from annotate.views.lists import filter_form
from curation.models import Project
from workers.models import JudgeConfig, TeacherConfig

SECRET_WORDS = ("key", "token", "secret", "password")
ALLOWED_SECRET_OPTIONS = {"api_key_env"}
RESERVED_NAMES = {"new", "evaluate"}


def checked_options(text: str) -> dict[str, Any]:
    """Backend options from the form's JSON text; a key that looks like a secret is refused
    (configs are stored in the database: secrets stay in the workers' environment)."""
    text = text.strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(f"Not valid JSON: {error}") from None
    if not isinstance(options, dict):
        raise forms.ValidationError('Give a JSON object, e.g. {"concurrency": 4}.')
    for key in options:
        secret = any(word in key.lower() for word in SECRET_WORDS)
        if secret and key not in ALLOWED_SECRET_OPTIONS:
            raise forms.ValidationError(
                f"'{key}' looks like a secret: secrets are not stored. Put it in an "
                'environment variable of the workers and name it with "api_key_env".'
            )
    return options


class JudgeConfigForm(forms.ModelForm):
    options = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=JudgeConfig._meta.get_field("options").help_text,
    )
    filter = forms.CharField(
        required=False,
        label="Filter",
        help_text="The trajectory list's filter as a query string, e.g. "
        "outcome=failure&model=gpt-4o; empty means every trajectory of the project.",
    )

    class Meta:
        model = JudgeConfig
        fields = ["name", *JudgeConfig.VERSIONED_FIELDS, "filter", "schedule_minutes", "is_active"]
        widgets = {"prompt_template": forms.Textarea(attrs={"rows": 8})}

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        if not self.is_bound and self.instance.pk:
            options = self.instance.options
            self.initial["options"] = json.dumps(options) if options else ""
            self.initial["filter"] = urlencode(self.instance.filter)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if name in RESERVED_NAMES:
            raise forms.ValidationError(f"'{name}' is taken by a page; choose another name.")
        taken = JudgeConfig.objects.filter(project=self.project, name=name)
        if taken.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(f"This project already has a judge named '{name}'.")
        return name

    def clean_options(self) -> dict[str, Any]:
        return checked_options(self.cleaned_data.get("options") or "")

    def clean_filter(self) -> dict[str, str]:
        text = (self.cleaned_data.get("filter") or "").strip().lstrip("?")
        data = QueryDict(text)
        form = filter_form(data, self.project)
        filters = form.filters()
        if form.errors:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            raise forms.ValidationError(f"Bad filter: {problems}")
        unknown = set(data) - set(form.fields)
        if unknown:
            raise forms.ValidationError(f"Unknown filter: {', '.join(sorted(unknown))}")
        return {k: str(v) for k, v in filters.items() if k != "after"}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        backend, strategy = cleaned.get("backend"), cleaned.get("strategy")
        heuristic = backend == JudgeConfig.Backend.HEURISTIC
        whole_only = (JudgeConfig.Backend.HEURISTIC, JudgeConfig.Backend.CRITIC)
        if backend in whole_only and strategy and strategy != JudgeConfig.Strategy.ALL_AT_ONCE:
            self.add_error("strategy", "This backend judges whole trajectories: all at once.")
        if not heuristic and not cleaned.get("model"):
            self.add_error("model", "Name the model (or a local path for transformers / vLLM).")
        if cleaned.get("top_p") is not None and not 0 < cleaned["top_p"] <= 1:
            self.add_error("top_p", "top_p is in (0, 1].")
        if cleaned.get("temperature") is not None and not 0 <= cleaned["temperature"] <= 2:
            self.add_error("temperature", "Temperature is between 0 and 2.")
        if cleaned.get("max_attempts") == 0:
            self.add_error("max_attempts", "At least one attempt.")
        return cleaned


class TeacherConfigForm(forms.ModelForm):
    options = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=TeacherConfig._meta.get_field("options").help_text,
    )

    class Meta:
        model = TeacherConfig
        fields = ["name", *TeacherConfig.SETTINGS]
        widgets = {"prompt_template": forms.Textarea(attrs={"rows": 5})}

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        if not self.is_bound and self.instance.pk and self.instance.options:
            self.initial["options"] = json.dumps(self.instance.options)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if name == "new":
            raise forms.ValidationError("'new' is taken by a page; choose another name.")
        taken = TeacherConfig.objects.filter(project=self.project, name=name)
        if taken.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(f"This project already has a teacher named '{name}'.")
        return name

    def clean_options(self) -> dict[str, Any]:
        return checked_options(self.cleaned_data.get("options") or "")
