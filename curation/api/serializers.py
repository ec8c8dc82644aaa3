from rest_framework import serializers

from curation.models import ImportJob, Project, Step, Task, Trajectory


class ProjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["id", "slug", "name", "description", "error_taxonomy", "label_schema"]


class TaskSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Task
        fields = ["id", "project", "external_id", "instruction", "reference", "metadata"]


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = [
            "index",
            "role",
            "name",
            "content",
            "reasoning",
            "tool_calls",
            "tool_call_id",
            "metadata",
        ]


class TrajectorySerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    task = serializers.SlugRelatedField(slug_field="external_id", read_only=True)

    class Meta:
        model = Trajectory
        fields = [
            "id",
            "project",
            "task",
            "external_id",
            "agent_model",
            "agent_role",
            "source_format",
            "success",
            "reward",
            "step_count",
            "parent",
            "branch_step",
            "created_at",
        ]


class TrajectoryDetailSerializer(TrajectorySerializer):
    steps = StepSerializer(many=True, read_only=True)
    tools = serializers.JSONField(read_only=True)

    class Meta(TrajectorySerializer.Meta):
        fields = [
            *TrajectorySerializer.Meta.fields,
            "outcome_info",
            "tools",
            "metadata",
            "content_hash",
            "steps",
        ]


class ImportErrorSerializer(serializers.Serializer):
    source = serializers.CharField()
    location = serializers.CharField()
    error = serializers.CharField()


class ImportSummarySerializer(serializers.Serializer):
    project = serializers.CharField()
    created = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    failed = serializers.IntegerField()
    steps = serializers.IntegerField()
    tasks_created = serializers.IntegerField()
    annotations = serializers.IntegerField()
    errors = ImportErrorSerializer(many=True)


class ImportJobSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    progress = serializers.FloatField(read_only=True)
    url = serializers.HyperlinkedIdentityField(view_name="api-import-job-detail")

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "url",
            "project",
            "original_name",
            "format_name",
            "status",
            "progress",
            "summary",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]
