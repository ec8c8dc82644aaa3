"""Projects made before judges existed get the default heuristic judge, as new ones do."""

from django.db import migrations


def add_default_judges(apps, schema_editor):
    Project = apps.get_model("curation", "Project")
    JudgeConfig = apps.get_model("workers", "JudgeConfig")
    for project in Project.objects.exclude(judge_configs__name="heuristic"):
        JudgeConfig.objects.create(
            project=project, name="heuristic", backend="heuristic", model="heuristic"
        )


class Migration(migrations.Migration):
    dependencies = [("workers", "0001_initial")]

    operations = [migrations.RunPython(add_default_judges, migrations.RunPython.noop)]
