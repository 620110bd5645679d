"""Edges of every request: NUL characters refused before any view queries the database with
them, unknown URLs answered in the error shape, and a busy or unreachable database answered
with 503."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from openbot.errors import (
    BUSY_HEADERS,
    BUSY_STATUS,
    busy_body,
    database_busy,
    database_unreachable,
    error_body,
)
from openbot.outage import answer_unavailable, database_outage, unreachable_error_of


class RefuseNulCharacters:
    """PostgreSQL text cannot hold NUL (`DataError`, a 500); no id or parameter contains one.

    A path with NUL names nothing that exists: 404. A query parameter with NUL: 400 naming it.
    Request bodies are checked by the serializers (DRF's CharField refuses NUL).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return JsonResponse(error_body("not_found", "not found"), status=404)
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                shown = name.replace("\x00", "\\x00")
                return JsonResponse(
                    error_body(
                        "invalid",
                        f"{shown}: may not contain NUL characters",
                        {shown: ["may not contain NUL characters"]},
                    ),
                    status=400,
                )
        return self.get_response(request)


class JsonNotFound:
    """[A14] A URL that matches no route answers the JSON 404 in every settings module.

    Django's `handler404` is not used while DEBUG is on (the development default), which shows
    an HTML page instead; a route's own 404 (an unknown or invisible id) is left as it is.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            return JsonResponse(error_body("not_found", "not found"), status=404)
        return response


class AnswerDatabaseUnavailable:
    """A database that cannot answer is 503 with `Retry-After`, never a 500.

    A busy database, in the views DRF's exception handler does not see (the admin).
    An unreachable one, raised by any view (DRF's too: its handler leaves such errors to
    Django) or by a middleware inside this one (`openbot.outage`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with database_outage.watch():
            response = self.get_response(request)
        if response.status_code == 500 and (exc := unreachable_error_of(request)) is not None:
            return answer_unavailable(request, exc)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if database_busy(exception):
            return JsonResponse(busy_body(), status=BUSY_STATUS, headers=BUSY_HEADERS)
        if database_unreachable(exception):
            return answer_unavailable(request, exception)
        return None
