from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    """Keyset pagination on the primary key: as fast on page 1,000 as on page 1."""

    ordering = "id"
    page_size_query_param = "page_size"
    max_page_size = 500
