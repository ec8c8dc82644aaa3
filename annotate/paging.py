"""Keyset pages of trajectory lists: `?after=<last id seen>`, never OFFSET, so page 2,000 costs
what page 1 does."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

PAGE_SIZE = 50


def keyset_page(rows: QuerySet, is_first_page: bool) -> dict[str, Any]:
    """One page of `rows` (already ordered by id and filtered by `after`), with the template
    context templates/annotate/_pager.html needs."""
    fetched = list(rows[: PAGE_SIZE + 1])
    page = fetched[:PAGE_SIZE]
    return {
        "trajectories": page,
        "next_after": page[-1].pk if len(fetched) > PAGE_SIZE else None,
        "is_first_page": is_first_page,
    }
