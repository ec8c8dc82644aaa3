from django.contrib import admin

from workers.models import (
    Correction,
    CorrectionBatch,
    CriticModel,
    JudgeBatch,
    JudgeConfig,
    JudgeConfigVersion,
    JudgePanel,
    JudgeRun,
    TeacherConfig,
)


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


@admin.register(TeacherConfig)
class TeacherConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "backend", "model")
    list_filter = ("backend", "project")


@admin.register(CorrectionBatch)
class CorrectionBatchAdmin(admin.ModelAdmin):
    list_display = ("pk", "project", "teacher", "mode", "environment", "status", "total")
    list_filter = ("status", "mode")
    readonly_fields = ("skipped", "requested_by", "created_at", "finished_at")


@admin.register(Correction)
class CorrectionAdmin(admin.ModelAdmin):
    list_display = ("pk", "source", "intervention_step", "status")
    list_filter = ("status",)
    raw_id_fields = ("batch", "source", "result")
    readonly_fields = ("teacher_settings", "calls", "guidance", "error")


@admin.register(CriticModel)
class CriticModelAdmin(admin.ModelAdmin):
    list_display = ("project", "version", "status", "created_at")
    list_filter = ("status", "project")
    readonly_fields = ("summary", "metrics")
