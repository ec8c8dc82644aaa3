from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request


class IdCursorPagination(CursorPagination):
    """Keyset pagination on the primary key: as fast on page 1,000 as on page 1."""

    ordering = "id"
    page_size_query_param = "page_size"
    max_page_size = 500

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's, refusing (404, as any bad cursor) one whose position is not an id: DRF would
        hand it to the id lookup, which raises."""
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            try:
                int(cursor.position)
            except ValueError:
                raise NotFound(self.invalid_cursor_message) from None
        return cursor
