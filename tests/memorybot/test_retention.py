"""[P5] Retention: `manage.py prune_model_calls --older-than DAYS`, and the workers' daily
pruning when OPENBOT_MODEL_CALL_RETENTION_DAYS is set, blank the requests and results of old
model calls and keep the rest of each row (usage, cost, purpose, status, ids)."""

import io
import json
import time
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.utils import timezone
from pytest_django.fixtures import Settings

from memorybot.models import ModelCall, ModelCallEntry
from memorybot.recovery import DAY_SECONDS, prune_model_calls_daily
from settings.env import env_days
from tests.conftest import World
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import flush_broker, learning_worker
from tests.memorybot.scenes import call_carrying


def recorded(world: World, fake: FakeOpenAI, text: str, *, days_old: int) -> ModelCall:
    """A recorded call whose request carries an entry with `text`, made `days_old` days ago."""
    fake.reply(content=f"answer to {text}", usage=(1000, 500))
    outcome = call_carrying(
        world.alice, world.bot, EntryFactory.create(author=world.alice, bot=world.bot, content=text)
    )
    ModelCall.objects.filter(pk=outcome.call_id).update(
        created_at=timezone.now() - timedelta(days=days_old, minutes=1)
    )
    return ModelCall.objects.get(pk=outcome.call_id)


def blank(call: ModelCall) -> bool:
    call.refresh_from_db()
    return (call.request, call.result) == ("", "") and call.blanked_at is not None


def prune(*args: str) -> dict[str, int]:
    out = io.StringIO()
    call_command("prune_model_calls", *args, stdout=out)
    result: dict[str, int] = json.loads(out.getvalue())
    return result


def test_prune_blanks_old_calls_and_keeps_their_rows(world: World, fake_openai: FakeOpenAI) -> None:
    old = recorded(world, fake_openai, "old words", days_old=31)
    recent = recorded(world, fake_openai, "recent words", days_old=29)

    assert prune("--older-than", "30") == {"blanked": 1}

    assert blank(old)
    assert (old.purpose, old.status, old.input_tokens, old.output_tokens) == (
        "enrichment",
        "ok",
        1000,
        500,
    )
    assert (old.cost_micros, old.billed, old.organization_id, old.bot_id) == (
        450,
        True,
        world.org.id,
        world.bot.id,
    )
    assert not ModelCallEntry.objects.filter(call=old).exists()
    assert not blank(recent)
    assert "recent words" in recent.request and "recent words" in recent.result
    assert ModelCallEntry.objects.filter(call=recent).count() == 1
    # Nothing is blanked twice.
    assert prune("--older-than", "30") == {"blanked": 0}
    assert prune("--older-than", "1") == {"blanked": 1}


@pytest.mark.parametrize("days", ["0", "-3", "x", "1.5"])
def test_prune_names_a_bad_age(world: World, days: str) -> None:
    with pytest.raises(CommandError, match="--older-than"):
        call_command("prune_model_calls", "--older-than", days, stdout=io.StringIO())


def test_prune_needs_an_age(world: World) -> None:
    with pytest.raises(CommandError, match="--older-than"):
        call_command("prune_model_calls", stdout=io.StringIO())


def test_the_retention_prunes_once_a_day(
    world: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_MODEL_CALL_RETENTION_DAYS = 30
    old = recorded(world, fake_openai, "old words", days_old=31)
    recent = recorded(world, fake_openai, "recent words", days_old=29)

    pruned_at = prune_model_calls_daily(None)

    assert pruned_at is not None
    assert blank(old) and not blank(recent)
    # Within a day of the last pruning this process prunes nothing.
    older = recorded(world, fake_openai, "older words", days_old=40)
    assert prune_model_calls_daily(pruned_at) == pruned_at
    assert not blank(older)
    # A day later it prunes again.
    again = prune_model_calls_daily(pruned_at - DAY_SECONDS)
    assert again is not None and again > pruned_at - DAY_SECONDS
    assert blank(older) and not blank(recent)


def test_without_a_retention_nothing_is_pruned(
    world: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    settings.OPENBOT_MODEL_CALL_RETENTION_DAYS = None
    old = recorded(world, fake_openai, "old words", days_old=3650)

    assert prune_model_calls_daily(None) is None

    assert not blank(old)


@pytest.mark.django_db(transaction=True)
def test_a_worker_prunes_when_it_starts(
    world: World, fake_openai: FakeOpenAI, settings: Settings
) -> None:
    """The worker's recovery loop prunes on boot (and then daily)."""
    flush_broker()
    settings.OPENBOT_MODEL_CALL_RETENTION_DAYS = 7
    old = recorded(world, fake_openai, "old words", days_old=8)
    recent = recorded(world, fake_openai, "recent words", days_old=6)

    with learning_worker():
        deadline = time.monotonic() + 20
        while not blank(old):
            assert time.monotonic() < deadline, "the worker did not prune"
            time.sleep(0.05)

    assert not blank(recent)


@pytest.mark.parametrize(("value", "days"), [("", None), ("30", 30), ("1", 1)])
def test_the_retention_setting_reads_whole_days(
    monkeypatch: pytest.MonkeyPatch, value: str, days: int | None
) -> None:
    monkeypatch.setenv("OPENBOT_MODEL_CALL_RETENTION_DAYS", value)
    assert env_days("OPENBOT_MODEL_CALL_RETENTION_DAYS") == days


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "a week", "30d"])
def test_a_bad_retention_setting_stops_the_process(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("OPENBOT_MODEL_CALL_RETENTION_DAYS", value)
    with pytest.raises(ImproperlyConfigured, match="OPENBOT_MODEL_CALL_RETENTION_DAYS"):
        env_days("OPENBOT_MODEL_CALL_RETENTION_DAYS")
