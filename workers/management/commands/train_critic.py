"""python manage.py train_critic --project SLUG [--from effective|gold|humans|adjudicated]
[--encoder minilm|hashing] [--retrain-after N] [--use-as-judge] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.models import Project
from workers.critic import ENCODERS, jobs
from workers.models import CriticModel, JudgeConfig


def percent(measure: dict[str, Any]) -> str:
    if not measure.get("n"):
        return "n/a (nothing to compare)"
    low, high = measure["low"], measure["high"]
    interval = f" [{low:.1%}, {high:.1%}]" if low is not None and high is not None else ""
    return f"{measure['rate']:.1%}{interval}  ({measure['correct']}/{measure['n']})"


class Command(BaseCommand):
    help = (
        "Train the project's next step critic version, in this process, on the trajectories "
        "whose label names a first critical step (people's labels only), holding a share of "
        "the tasks out; print the held-out first-critical-step accuracy (exact, within one, "
        "within three), agent accuracy and calibration. Judges using the previous version "
        "move onto the new one (judge with them as usual: `manage.py judge --config critic`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument(
            "--from",
            dest="source",
            choices=CriticModel.Source.values,
            default=CriticModel.Source.EFFECTIVE,
            help="whose labels: the effective label where a person set its critical step "
            "(default), gold labels, human annotations or adjudications",
        )
        parser.add_argument("--encoder", choices=ENCODERS, default="minilm")
        parser.add_argument(
            "--retrain-after",
            type=int,
            metavar="N",
            help="train a new version (in a worker) once N more trajectories are labelled",
        )
        parser.add_argument(
            "--use-as-judge",
            action="store_true",
            help=f"make (or move) the project's '{jobs.JUDGE_NAME}' judge onto this version",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        if options["retrain_after"] is not None and options["retrain_after"] < 1:
            raise CommandError("--retrain-after must be at least 1")
        try:
            critic = jobs.request(
                project,
                options["source"],
                options["encoder"],
                retrain_after=options["retrain_after"],
                send=False,
            )
        except jobs.NoLabels as error:
            raise CommandError(str(error)) from None
        critic = jobs.train(critic.pk, judge_after=False)
        if critic.status != CriticModel.Status.DONE:
            raise CommandError(f"critic v{critic.version} failed: {critic.error}")
        if options["use_as_judge"]:
            jobs.use_as_judge(critic, None)
        judge = JudgeConfig.objects.filter(
            project=project, backend=JudgeConfig.Backend.CRITIC, model=critic.artifact
        ).first()
        if options["json"]:
            out = {
                "project": project.slug,
                "version": critic.version,
                "artifact": critic.artifact,
                "source": critic.source,
                "summary": critic.summary,
                "held_out": critic.metrics,
                "judge": judge.name if judge else None,
            }
            self.stdout.write(json.dumps(out, indent=2))
            return
        self.stdout.write(self.report(critic, judge.name if judge else ""))

    def report(self, critic: CriticModel, judge: str) -> str:
        s, m = critic.summary, critic.metrics
        calibration = m["calibration"]
        lines = [
            f"Critic v{critic.version} of {critic.project.slug}: {critic.artifact}",
            f"trained on {s['train']['trajectories']} trajectories ({s['train']['tasks']} "
            f"tasks) from {critic.get_source_display()}; held out "
            f"{s['held_out']['trajectories']} ({s['held_out']['tasks']} tasks)",
            f"encoder {s['encoder']}, {s['components']} embedding components, L2 {s['l2']}, "
            f"temperature {s['temperature']} ({s['chosen_by']})",
            "held-out:",
            f"critical step exact   {percent(m['step_exact'])}",
            f"  within one step     {percent(m['step_within_one'])}",
            f"  within three steps  {percent(m['step_within_three'])}",
            f"agent                 {percent(m['agent'])}",
            f"calibration           ECE {calibration['ece']:.3f}, mean confidence "
            f"{calibration['mean_confidence']:.1%} against accuracy {calibration['accuracy']:.1%}",
        ]
        if judge:
            lines.append(
                f"judge '{judge}' uses it now: python manage.py judge --config {judge} "
                f"--project {critic.project.slug} --here"
            )
        return "\n".join(lines)
