"""Refuse NUL characters in the URL before any view queries the database with them."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from openbot.errors import error_body


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
