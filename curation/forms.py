from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

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

    def clean_file(self) -> UploadedFile:
        upload = self.cleaned_data["file"]
        limit = settings.IMPORT_MAX_UPLOAD_BYTES
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is {upload.size} bytes, over the limit of {limit} bytes per upload "
                "(IMPORT_MAX_UPLOAD_BYTES). Split it into smaller files, or ask an admin to "
                "raise the limit."
            )
        return upload
