from django.contrib import admin

from curation.models import ImportJob, Membership, Project, Step, Task, ToolSet, Trajectory


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["external_id", "project"]
    list_filter = ["project"]
    search_fields = ["external_id", "instruction"]
    list_select_related = ["project"]


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    fields = ["index", "role", "name", "content", "tool_calls", "tool_call_id"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "external_id",
        "project",
        "task",
        "agent_model",
        "agent_role",
        "success",
        "reward",
        "step_count",
    ]
    list_filter = ["project", "agent_role", "success", "source_format", "agent_model"]
    search_fields = ["external_id", "task__external_id", "agent_model"]
    list_select_related = ["project", "task"]
    raw_id_fields = ["task", "parent", "toolset"]
    readonly_fields = ["content_hash", "created_at"]
    inlines = [StepInline]


@admin.register(ToolSet)
class ToolSetAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "__str__"]
    list_filter = ["project"]
    readonly_fields = ["content_hash"]


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["trajectory", "index", "role", "name"]
    list_filter = ["role"]
    raw_id_fields = ["trajectory"]
    list_select_related = ["trajectory"]


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "original_name", "status", "created_by", "created_at"]
    list_filter = ["status", "project"]
    readonly_fields = ["summary", "error", "started_at", "finished_at", "bytes_total", "bytes_done"]
    list_select_related = ["project", "created_by"]
