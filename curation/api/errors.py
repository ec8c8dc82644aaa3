"""The error answers of the API, for the schema: each operation lists the codes it can answer
besides its success (`errors(401, 404, 429)`), with the body DRF sends for each, so clients
and the fuzz test (tests/test_api_fuzz.py) know every status code to expect."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField()})

ERRORS = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT,
        description="Invalid parameters or body: messages by field name (`detail` when the "
        "body could not be parsed at all).",
    ),
    401: OpenApiResponse(DETAIL, description="No token, or an unknown one."),
    403: OpenApiResponse(DETAIL, description="The caller's role in the project does not allow it."),
    404: OpenApiResponse(
        DETAIL,
        description="No such object in the caller's projects (or an invalid page cursor).",
    ),
    415: OpenApiResponse(DETAIL, description="A body without a Content-Type this operation reads."),
    429: OpenApiResponse(
        DETAIL, description="Throttled (API_THROTTLE_USER / _ANON): Retry-After says when to retry."
    ),
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The documented error answers of these codes."""
    return {code: ERRORS[code] for code in codes}
