"""Which corrections an export may use (DESIGN.md section 6: only accepted ones are exported).
A correction's status lives on its `Correction` row (workers), reached here through the
reverse relation `correction`, so curation imports nothing from workers."""

from __future__ import annotations

from django.db.models import Q

ACCEPTED = "accepted"


def accepted_corrections() -> Q:
    """Corrections whose verifier, or a reviewer over it, accepted them."""
    return Q(
        agent_role="correction",
        parent__isnull=False,
        branch_step__isnull=False,
        correction__status=ACCEPTED,
    )


def exportable() -> Q:
    """Every run that is not a correction, and the accepted corrections."""
    return ~Q(agent_role="correction") | accepted_corrections()
