"""[X5] One damaged value in any encrypted column never takes a route down.

For each encrypted column of the product, one stored value is damaged with a raw SQL UPDATE
(a flipped byte); then every route that reads chats and memory answers 200, each list holds
every row it held except the damaged one, the server log names table, row id and column (no
token, no content), and `verify_encryption` names exactly that id. A dropped key is handled
the same way.
"""

import json
import logging
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import models

from chats.models import Item
from memory.models import Change, Entry, EntryVector
from memorybot.models import Confession, Enrichment, ModelCall
from tests.conftest import World
from tests.openbot.damage import (
    chat_filling_every_encrypted_column,
    flip_a_byte,
    stored_value,
    unreadable_in,
    verify_encryption,
)

# Each encrypted column; the list route that shows its rows, and how a row is named there.
COLUMNS: list[tuple[type[models.Model], str, str | None]] = [
    (Entry, "content", "memory"),
    # Search passes over a vector no key opens (tests/memory/test_meaning.py); no list shows it.
    (EntryVector, "vector", None),
    (Change, "payload", None),
    (Item, "text", "items"),
    (Confession, "text", "confessions"),
    (Confession, "reply", "confessions"),
    (Enrichment, "text", "enrichments"),
    (Enrichment, "original", "enrichments"),
    (ModelCall, "request", None),
    (ModelCall, "result", None),
]


def routes(world: World, chat_id: str) -> dict[str, str]:
    bot = world.bot.id
    return {
        "memory": f"/v1/bots/{bot}/memory",
        "log": f"/v1/bots/{bot}/memory/log",
        "settings": f"/v1/bots/{bot}/memory/bot",
        "chat": f"/v1/chats/{chat_id}",
        "items": f"/v1/chats/{chat_id}/items",
        "confessions": f"/v1/chats/{chat_id}/confessions",
        "enrichments": f"/v1/chats/{chat_id}/enrichments",
    }


def read_every_route(world: World, chat_id: str) -> dict[str, Any]:
    """Every route's body, as alice (she owns the chat and may change the bot's settings)."""
    client = world.alice.client()
    bodies = {}
    for name, url in routes(world, chat_id).items():
        response = client.get(url)
        assert response.status_code == 200, (name, response.status_code, response.content)
        bodies[name] = response.json()
    return bodies


def without_row(
    bodies: dict[str, Any], route: str | None, model: type[models.Model], pk: Any
) -> dict[str, Any]:
    """`bodies` as they read with the row `pk` of `model` left out of `route`'s list."""
    expected = json.loads(json.dumps(bodies))
    if route == "memory":
        expected["memory"]["entries"] = [e for e in expected["memory"]["entries"] if e["id"] != pk]
    elif route == "items":
        seq = Item.objects.values_list("seq", flat=True).get(pk=pk)
        expected["items"]["items"] = [
            i for i in expected["items"]["items"] if i["id"] != f"i-{seq}"
        ]
    elif route == "confessions":
        rows = expected["confessions"]["confessions"]
        expected["confessions"]["confessions"] = [row for row in rows if row["id"] != str(pk)]
    elif route == "enrichments":
        turn = str(Enrichment.objects.values_list("turn_id", flat=True).get(pk=pk))
        rows = expected["enrichments"]["enrichments"]
        expected["enrichments"]["enrichments"] = [row for row in rows if row["turn"] != turn]
    return expected


@pytest.mark.parametrize(
    ("model", "name", "route"), COLUMNS, ids=lambda value: getattr(value, "__name__", value)
)
def test_one_damaged_value_leaves_every_route_up_and_every_other_row_listed(
    world: World,
    model: type[models.Model],
    name: str,
    route: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat_id = chat_filling_every_encrypted_column(world)
    before = read_every_route(world, chat_id)
    for listed in ("items", "confessions", "enrichments"):
        assert len(before[listed][listed]) >= 2
    assert len(before["memory"]["entries"]) == 2
    pk = model._base_manager.order_by("pk").values_list("pk", flat=True)[0]
    column = model._meta.get_field(name).column  # type: ignore[union-attr]
    token = flip_a_byte(model, pk, name)
    caplog.set_level(logging.WARNING)

    after = read_every_route(world, chat_id)

    assert after == without_row(before, route, model, pk)
    assert unreadable_in(verify_encryption()[0]) == {(model._meta.db_table, column, pk)}
    logged = {record.getMessage() for record in caplog.records if record.name == "openbot.fields"}
    if route is None:
        assert logged == set()  # no route reads this column
    else:
        assert logged == {
            f"left out a row no key opens: table={model._meta.db_table} id={pk} column={column}"
        }
    for value in (token, stored_value(model, pk, name)):
        assert value[:16] not in caplog.text and value[-16:] not in caplog.text
    assert "Basel" not in caplog.text


def test_a_dropped_key_leaves_every_route_up_with_empty_lists(world: World, settings: Any) -> None:
    chat_id = chat_filling_every_encrypted_column(world)
    before = read_every_route(world, chat_id)
    settings.OPENBOT_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]

    after = read_every_route(world, chat_id)

    assert after["memory"] == {"entries": [], "version": before["memory"]["version"]}
    assert after["log"] == before["log"]
    assert after["items"] == {"items": []}
    assert after["confessions"] == {"confessions": []}
    assert after["enrichments"] == {"enrichments": []}
    assert (after["settings"], after["chat"]) == (before["settings"], before["chat"])
    report, _ = verify_encryption()
    assert report["unreadable"] == sum(model._base_manager.count() for model, name, _ in COLUMNS)


def test_deleting_and_purging_damaged_rows_reads_none_of_them(world: World) -> None:
    """Deletes go by id: every value damaged, history delete and purge still answer."""
    chat_id = chat_filling_every_encrypted_column(world)
    for model, name, _ in COLUMNS:
        for pk in model._base_manager.values_list("pk", flat=True):
            flip_a_byte(model, pk, name)
    client = world.alice.client()

    deleted = client.delete(f"/v1/chats/{chat_id}/items")
    purged = client.post(
        f"/v1/bots/{world.bot.id}/memory/purge",
        {"tag": f"from:{world.alice.person.id}"},
        format="json",
    )

    assert (deleted.status_code, purged.status_code) == (204, 200), purged.content
    assert purged.json() == {"removed": 2}
    after = read_every_route(world, chat_id)
    assert (after["items"], after["confessions"], after["enrichments"]) == (
        {"items": []},
        {"confessions": []},
        {"enrichments": []},
    )
    assert after["memory"]["entries"] == []
