from django.contrib import admin

from workers.models import JudgeBatch, JudgeConfig, JudgeConfigVersion, JudgePanel, JudgeRun


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "backend", "model", "strategy", "schedule_minutes")
    list_filter = ("backend", "strategy", "project")
    readonly_fields = ("current_version", "created_by", "created_at")


@admin.register(JudgePanel)
class JudgePanelAdmin(admin.ModelAdmin):
    list_display = ("name", "project")
    filter_horizontal = ("members",)


@admin.register(JudgeConfigVersion)
class JudgeConfigVersionAdmin(admin.ModelAdmin):
    list_display = ("config", "number", "created_at")
    readonly_fields = ("config", "number", "settings", "created_at")


@admin.register(JudgeBatch)
class JudgeBatchAdmin(admin.ModelAdmin):
    list_display = ("pk", "version", "reason", "status", "total", "created_at")
    list_filter = ("status",)
    readonly_fields = ("version", "requested_by", "reason", "total", "created_at", "finished_at")


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("pk", "version", "trajectory", "status", "latency_s")
    list_filter = ("status",)
    raw_id_fields = ("trajectory", "batch", "annotation")
    readonly_fields = ("version", "calls", "result", "error")
