from django.contrib import admin

from annotate.models import Annotation


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
