"""Gold labels carried by imported files become annotations, in the import's transaction."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from annotate.effective import create_for_new
from annotate.models import Annotation
from curation.canonical import Labels, Record
from curation.signals import trajectories_imported


def gold_annotation(trajectory_id: int, labels: Labels) -> Annotation:
    return Annotation(
        trajectory_id=trajectory_id,
        source=Annotation.Source.GOLD,
        source_name=labels.annotator,
        verdict=labels.verdict,
        first_critical_step=labels.first_critical_step,
        root_cause_step=labels.root_cause_step,
        responsible_agent=labels.agent,
        error_category=labels.category,
        rationale=labels.rationale,
        confidence=labels.confidence,
        extra=labels.extra,
    )


@receiver(trajectories_imported)
def store_gold_labels(trajectory_ids: list[int], records: list[Record], **kwargs: Any) -> int:
    """Gold annotations and the effective labels of the imported runs; returns the number of
    annotations."""
    by_trajectory = {
        trajectory_id: [gold_annotation(trajectory_id, labels) for labels in record.labels]
        for trajectory_id, record in zip(trajectory_ids, records, strict=True)
        if record.labels
    }
    annotations = [a for group in by_trajectory.values() for a in group]
    Annotation.objects.bulk_create(annotations)
    create_for_new(trajectory_ids, [r.success for r in records], by_trajectory)
    return len(annotations)
