"""The annotation form on the review page (the annotation helper implements it).

Contract: `form_context(request, trajectory) -> dict` gives what
templates/annotate/_annotation_form.html needs; the review page merges it into its context.
"""

from typing import Any

from django.http import HttpRequest
from django.urls import URLPattern

from curation.models import Trajectory


def form_context(request: HttpRequest, trajectory: Trajectory) -> dict[str, Any]:
    return {}


urls: list[URLPattern] = []
