"""[G1] A database that stays busy past the timeout answers 503 with `Retry-After` and the
error shape — on a DRF route and in the admin — never a 500; a moment later the request passes.

SQLite only: another connection holds the write lock, as a long writer would."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from tests.busy_database import held_write_lock
from tests.conftest import World

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's busy timeout"),
    pytest.mark.django_db(transaction=True),
]


def assert_busy(response: Any) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "2"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == "busy"


def test_a_route_answers_503_and_then_passes(world: World) -> None:
    client = world.alice.client()
    with held_write_lock() as lock:
        assert_busy(client.post("/v1/chats", {"bot": world.bot.id}, format="json"))
        lock.release()
        assert client.post("/v1/chats", {"bot": world.bot.id}, format="json").status_code == 201


def test_the_admin_login_answers_503_and_then_passes(db: Any) -> None:
    User.objects.create_user(username="support", password="pw-support", is_staff=True)
    login = {"username": "support", "password": "pw-support", "next": "/admin/"}
    client = Client()
    with held_write_lock() as lock:
        assert_busy(client.post("/admin/login/", login))
        lock.release()
        assert client.post("/admin/login/", login).status_code == 302
