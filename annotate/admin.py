from django.contrib import admin
from django.http import HttpRequest

from annotate.models import Annotation, AnnotationChange


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    list_display = [
        "trajectory",
        "source",
        "author",
        "source_name",
        "verdict",
        "first_critical_step",
        "responsible_agent",
        "error_category",
    ]
    list_filter = ["source", "verdict", "status", "trajectory__project"]
    search_fields = ["source_name", "responsible_agent", "rationale"]
    raw_id_fields = ["trajectory", "author"]
    list_select_related = ["trajectory", "author"]


@admin.register(AnnotationChange)
class AnnotationChangeAdmin(admin.ModelAdmin):
    """Read-only: the history is a record, not something to edit."""

    list_display = ["at", "trajectory", "user", "action", "annotation_id", "adjudication_id"]
    list_filter = ["action", "trajectory__project"]
    raw_id_fields = ["trajectory", "annotation", "adjudication", "user"]
    list_select_related = ["trajectory", "user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
