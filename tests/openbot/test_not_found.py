"""[A14] Every unknown URL answers JSON 404 with the error shape, with DEBUG on (the
development default) as with it off (production)."""

from typing import Any

import pytest
from django.test import Client

from tests.conftest import World

UNKNOWN = ["/", "/nope", "/v1", "/v1/nope", "/v1/chats/", "/v1/bots/bot_x/memory/", "/static/x"]


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("path", UNKNOWN)
def test_an_unknown_url_is_a_json_404(db: Any, settings: Any, debug: bool, path: str) -> None:
    settings.DEBUG = debug
    response = Client().get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": {"code": "not_found", "message": "not found"}}


def test_a_routes_own_404_keeps_its_message(world: World, settings: Any) -> None:
    settings.DEBUG = True
    response = world.alice.client().get("/v1/bots/bot_unknown/memory")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_admin_still_redirects_to_its_slash(db: Any, settings: Any) -> None:
    settings.DEBUG = True
    assert Client().get("/admin").status_code == 301
