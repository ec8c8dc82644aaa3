"""Forms of the reviewer and researcher pages: adjudication and project settings."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from annotate.forms import check_label_rules, check_steps_in_range
from annotate.models import Adjudication
from curation.models import Project, Trajectory

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
NAME_RULE = "use lowercase letters, digits, _ and -, starting with a letter or digit"
NAME_MAX = 100
LABEL_FIELDS = ("verdict", "first_critical_step", "root_cause_step", "error_category", "rationale")
FIELD_TYPES = ("numeric", "categorical", "boolean")
KEY_ORDER = ("name", "type", "min", "max", "choices", "description")
FIELD_KEYS = {
    "numeric": {"name", "type", "description", "min", "max"},
    "categorical": {"name", "type", "description", "choices"},
    "boolean": {"name", "type", "description"},
}


class AdjudicationForm(forms.ModelForm):
    """The final label of a trajectory. `based_on` is the `updated_at` of the adjudication the
    reviewer saw (empty if none), so a save over someone else's newer one is refused."""

    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Adjudication
        fields = [
            "verdict",
            "first_critical_step",
            "root_cause_step",
            "error_category",
            "rationale",
        ]
        widgets = {"rationale": forms.Textarea(attrs={"rows": 4})}
        help_texts = {
            "root_cause_step": "Where the failure started; defaults to the critical step."
        }

    def __init__(self, *args: Any, trajectory: Trajectory, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trajectory = trajectory
        self.fields["verdict"].required = True
        last = max(trajectory.step_count - 1, 0)
        for name in ("first_critical_step", "root_cause_step"):
            self.fields[name].widget.attrs.update(min=0, max=last)
        self.fields["error_category"] = forms.ChoiceField(
            label="Error category",
            required=False,
            choices=[("", "—")] + [(c, c) for c in trajectory.project.categories],
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        check_steps_in_range(self, data, self.trajectory.step_count)
        check_label_rules(self, data)
        return data


def taxonomy_text(taxonomy: list) -> str:
    """A taxonomy as the settings page shows it: `name: description`, one per line."""
    lines = []
    for entry in taxonomy:
        if isinstance(entry, dict):
            text = entry.get("description", "")
            lines.append(f"{entry['name']}: {text}" if text else entry["name"])
        else:
            lines.append(str(entry))
    return "\n".join(lines)


def schema_text(schema: list[dict]) -> str:
    """A label schema as the settings page shows it: one JSON object per line, keys in a fixed
    order (PostgreSQL's jsonb does not keep the order they were written in)."""
    return "\n".join(
        json.dumps(
            dict(sorted(field.items(), key=lambda item: _key_rank(item[0]))), ensure_ascii=False
        )
        for field in schema
    )


def _key_rank(key: str) -> tuple[int, str]:
    return (KEY_ORDER.index(key) if key in KEY_ORDER else len(KEY_ORDER), key)


def parse_taxonomy(text: str) -> list[dict[str, str]]:
    """`name: description` lines (blank lines skipped) as [{name, description}]."""
    taxonomy: list[dict[str, str]] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, _, description = (part.strip() for part in line.partition(":"))
        if not NAME.match(name) or len(name) > NAME_MAX:
            errors.append(f"Line {number}: “{name}” is not a valid name: {NAME_RULE}.")
        elif name in seen:
            errors.append(f"Line {number}: “{name}” repeats line {seen[name]}.")
        else:
            seen[name] = number
            taxonomy.append({"name": name, "description": description})
    if errors:
        raise forms.ValidationError(errors)
    if not taxonomy:
        raise forms.ValidationError("Give at least one category.")
    return taxonomy


def _number(field: dict, key: str) -> float | int | None:
    value = field.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"“{key}” must be a number")
    return value


def parse_field(field: Any) -> dict[str, Any]:
    """One extra label field, checked; ValueError says what is wrong."""
    if not isinstance(field, dict):
        raise ValueError("expected a JSON object")
    name = field.get("name")
    if not isinstance(name, str) or not NAME.match(name) or len(name) > NAME_MAX:
        raise ValueError(f"“name” must be a string: {NAME_RULE}")
    kind = field.get("type")
    if kind not in FIELD_TYPES:
        raise ValueError(f"“type” must be one of {', '.join(FIELD_TYPES)}")
    unknown = sorted(set(field) - FIELD_KEYS[kind])
    if unknown:
        raise ValueError(f"a {kind} field takes no {', '.join(unknown)}")
    if not isinstance(field.get("description", ""), str):
        raise ValueError("“description” must be a string")
    if kind == "numeric":
        low, high = _number(field, "min"), _number(field, "max")
        if low is not None and high is not None and low >= high:
            raise ValueError("“min” must be below “max”")
    if kind == "categorical":
        choices = field.get("choices")
        if (
            not isinstance(choices, list)
            or not choices
            or not all(isinstance(c, str) and c.strip() for c in choices)
        ):
            raise ValueError("“choices” must be a non-empty list of non-empty strings")
        if len(set(choices)) != len(choices):
            raise ValueError("“choices” repeats a choice")
    return field


def parse_schema(text: str) -> list[dict[str, Any]]:
    """One JSON object per line (blank lines skipped) as the project's extra label fields."""
    schema: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            field = parse_field(json.loads(line))
        except json.JSONDecodeError as error:
            errors.append(f"Line {number}: not valid JSON ({error.msg}).")
            continue
        except ValueError as error:
            errors.append(f"Line {number}: {error}.")
            continue
        if field["name"] in seen:
            errors.append(f"Line {number}: “{field['name']}” repeats line {seen[field['name']]}.")
            continue
        seen[field["name"]] = number
        schema.append(field)
    if errors:
        raise forms.ValidationError(errors)
    return schema


class ProjectSettingsForm(forms.Form):
    taxonomy = forms.CharField(
        label="Error taxonomy",
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}),
        help_text=(
            "One category a line: “name: one-line description”. Renaming or removing a "
            "category does not change existing annotations."
        ),
    )
    label_schema = forms.CharField(
        label="Extra label fields",
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text=(
            'One JSON object a line: {"name": "helpfulness", "type": "numeric", "min": 1, '
            '"max": 5}, {"name": "tone", "type": "categorical", "choices": ["polite", "rude"]} '
            'or {"name": "safe", "type": "boolean"}; each may have a "description".'
        ),
    )

    @classmethod
    def for_project(cls, project: Project, data: Any = None) -> ProjectSettingsForm:
        initial = {
            "taxonomy": taxonomy_text(project.error_taxonomy),
            "label_schema": schema_text(project.label_schema),
        }
        return cls(data, initial=initial)

    def clean_taxonomy(self) -> list[dict[str, str]]:
        return parse_taxonomy(self.cleaned_data["taxonomy"])

    def clean_label_schema(self) -> list[dict[str, Any]]:
        return parse_schema(self.cleaned_data["label_schema"])
