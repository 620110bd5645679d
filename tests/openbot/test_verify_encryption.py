"""[X5] `manage.py verify_encryption`: scans every encrypted column of every table in batches,
progress on stderr, exactly one JSON object on stdout naming per table the rows checked and,
per column, the ids no configured key opens. It writes nothing and prints no text or token."""

import io
import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import models

from chats import services as chat_services
from chats.models import Chat, Item
from memory.models import Change, Entry, EntryVector
from memorybot.models import Confession, Enrichment, ModelCall
from openbot.fields import encrypted_tables
from tests.conftest import World
from tests.openbot.damage import (
    chat_filling_every_encrypted_column,
    flip_a_byte,
    stored_value,
    truncate,
    unreadable_in,
    verify_encryption,
)

# Every encrypted column of the product, by model and field.
COLUMNS: list[tuple[type[models.Model], str]] = [
    (Entry, "content"),
    (EntryVector, "vector"),
    (Change, "payload"),
    (Item, "text"),
    (Confession, "text"),
    (Confession, "reply"),
    (Enrichment, "text"),
    (Enrichment, "original"),
    (ModelCall, "request"),
    (ModelCall, "result"),
]


def all_stored() -> dict[tuple[str, str, Any], str]:
    return {
        (model._meta.db_table, field.column_name, pk): stored_value(model, pk, field.name)
        for model, fields in encrypted_tables()
        for field in fields
        for pk in model._base_manager.values_list("pk", flat=True)
    }


@pytest.fixture
def scene(world: World) -> World:
    chat_filling_every_encrypted_column(world)
    return world


def test_the_columns_found_are_every_encrypted_column_of_the_product() -> None:
    found = {
        (model._meta.label, field.name) for model, fields in encrypted_tables() for field in fields
    }
    assert found == {(model._meta.label, name) for model, name in COLUMNS}


def test_an_undamaged_store_reports_every_table_with_its_rows_and_nothing_unreadable(
    scene: World,
) -> None:
    report, progress = verify_encryption()

    assert report["unreadable"] == 0
    expected_tables = {model._meta.db_table for model, _ in COLUMNS}
    assert set(report["tables"]) == expected_tables
    for model, name in COLUMNS:
        scanned = report["tables"][model._meta.db_table]
        assert scanned["checked"] == model._base_manager.count() > 0
        assert scanned["unreadable"][model._meta.get_field(name).column] == []  # type: ignore[union-attr]
    for table in expected_tables:
        assert f"{table}: " in progress


def test_it_names_exactly_the_damaged_ids_of_every_column(scene: World) -> None:
    damaged = set()
    for index, (model, name) in enumerate(COLUMNS):
        # A different row for each column where there is one, so no row hides another.
        ids = list(model._base_manager.order_by("pk").values_list("pk", flat=True))
        pk = ids[-1] if name in ("reply", "original", "result") else ids[0]
        (truncate if index % 2 else flip_a_byte)(model, pk, name)
        damaged.add((model._meta.db_table, model._meta.get_field(name).column, pk))  # type: ignore[union-attr]
    before = all_stored()

    report, _ = verify_encryption("--batch-size", "2")

    assert unreadable_in(report) == damaged
    assert report["unreadable"] == len(damaged)
    assert all_stored() == before  # nothing written


def test_a_dropped_key_names_every_stored_value_and_no_empty_one(
    scene: World, settings: Any
) -> None:
    chat_services.item_append(chat=Chat.objects.get(), kind="bot", text="")  # opens without keys
    stored = {where for where, value in all_stored().items() if value}
    assert len(stored) == len(all_stored()) - 1
    settings.OPENBOT_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]

    report, _ = verify_encryption()

    assert unreadable_in(report) == stored


def test_the_report_prints_no_text_and_no_token(scene: World) -> None:
    flip_a_byte(Item, Item.objects.order_by("pk").values_list("pk", flat=True)[0], "text")
    report, progress = verify_encryption()
    printed = json.dumps(report) + progress
    for token in all_stored().values():
        assert not token or token[:16] not in printed
    assert "Basel" not in printed


def test_batches_give_the_same_report(scene: World) -> None:
    flip_a_byte(Entry, Entry.objects.values_list("pk", flat=True)[0], "content")
    whole, _ = verify_encryption("--batch-size", "1000")
    in_ones, progress = verify_encryption("--batch-size", "1")
    assert in_ones == whole
    assert progress.count("chats_item: ") == Item.objects.count()


@pytest.mark.parametrize("size", ["0", "-3", "many"])
def test_it_names_a_bad_batch_size(size: str) -> None:
    with pytest.raises(CommandError, match="--batch-size"):
        call_command("verify_encryption", "--batch-size", size, stdout=io.StringIO())


def test_without_keys_it_refuses_to_run(settings: Any) -> None:
    settings.OPENBOT_ENCRYPTION_KEYS = []
    with pytest.raises(CommandError, match="OPENBOT_ENCRYPTION_KEYS"):
        call_command("verify_encryption", stdout=io.StringIO())
