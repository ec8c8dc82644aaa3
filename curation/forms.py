from django import forms

from curation.canonical import AGENT_ROLES
from curation.formats import FORMATS


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="JSON Lines, a JSON array or one JSON document; .gz is fine too."
    )
    format_name = forms.ChoiceField(
        label="Format",
        required=False,
        choices=[("", "detect from content")] + [(name, name) for name in sorted(FORMATS)],
    )
    agent_model = forms.CharField(
        required=False, max_length=200, help_text="Sets the agent model of every run."
    )
    agent_role = forms.ChoiceField(
        required=False, choices=[("", "as in the file")] + [(r, r) for r in AGENT_ROLES[:2]]
    )
