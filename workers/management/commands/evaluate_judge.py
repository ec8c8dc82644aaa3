"""python manage.py evaluate_judge --project SLUG --judge NAME --against gold|humans|adjudicated"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.models import Project
from workers.judging.compare import REFERENCES, UnknownJudge, compare
from workers.judging.evaluation import Rate


def percent(rate: Rate) -> str:
    if rate.value is None:
        return "n/a (nothing to compare)"
    low, high = rate.interval.low, rate.interval.high
    interval = f" [{low:.1%}, {high:.1%}]" if low is not None and high is not None else ""
    return f"{rate.value:.1%}{interval}  ({rate.correct}/{rate.n})"


class Command(BaseCommand):
    help = (
        "How far a judge (its current version) or a panel agrees with gold labels, humans or "
        "adjudications, on the trajectories both labelled: verdict accuracy and Cohen's kappa, "
        "first-critical-step accuracy (exact, within one, within three), agent and category "
        "accuracy, with bootstrap 95% intervals."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--judge", required=True, help="a judge config's or a panel's name")
        parser.add_argument("--against", required=True, choices=REFERENCES)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project '{options['project']}'")
        try:
            result = compare(project, options["judge"], options["against"])
        except UnknownJudge as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        report = result.report
        kappa = "n/a" if report.kappa is None else f"{report.kappa:.3f}"
        lines = [
            f"{result.judge} against {result.against}: {report.n} trajectories both labelled "
            f"(judge {result.judged}, {result.against} {result.referenced})",
            f"verdict accuracy      {percent(report.verdict)}",
            f"verdict kappa         {kappa}",
            f"critical step exact   {percent(report.step_exact)}",
            f"  within one step     {percent(report.step_within_one)}",
            f"  within three steps  {percent(report.step_within_three)}",
            f"agent                 {percent(report.agent)}",
            f"category              {percent(report.category)}",
        ]
        if result.ties:
            lines.append(f"panel verdict ties    {result.ties}")
        self.stdout.write("\n".join(lines))
