"""GET and PATCH /v1/bots/:botId/memory/bot: the memory bot's settings [A5]."""

from typing import Any

import pytest

from memory.models import Pool
from tests.conftest import World

EXAMPLE = {
    "expected": 0,
    "instructions": "Decisions of the team may be shared with the team.",
    "concurrency": 2,
    "budget": {"period": "month", "limitMicros": 5_000_000},
}


def url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory/bot"


def patch(world: World, body: Any) -> Any:
    return world.alice.client().patch(url(world), body, format="json")


def test_settings_start_empty(world: World) -> None:
    response = world.alice.client().get(url(world))

    assert response.status_code == 200
    assert response.json() == {
        "version": 0,
        "instructions": "",
        "concurrency": None,
        "budget": None,
        "recall": "recent",
    }


def test_patch_with_the_documented_example(world: World) -> None:
    response = patch(world, EXAMPLE)

    assert response.status_code == 200
    expected = {
        "version": 1,
        "instructions": "Decisions of the team may be shared with the team.",
        "concurrency": 2,
        "budget": {"period": "month", "limitMicros": 5_000_000},
        "recall": "recent",
    }
    assert response.json() == expected
    assert world.alice.client().get(url(world)).json() == expected


def test_expected_must_be_the_current_version(world: World) -> None:
    assert patch(world, EXAMPLE).status_code == 200

    stale = patch(world, {**EXAMPLE, "expected": 0, "instructions": "share everything"})
    ahead = patch(world, {"expected": 5, "concurrency": 9})

    assert stale.status_code == ahead.status_code == 409
    assert stale.json()["error"]["code"] == "version_conflict"
    current = world.alice.client().get(url(world)).json()
    assert current["version"] == 1
    assert current["instructions"] == EXAMPLE["instructions"]
    assert current["concurrency"] == 2


def test_each_change_takes_the_next_version(world: World) -> None:
    assert patch(world, {"expected": 0, "instructions": "a"}).json()["version"] == 1
    assert patch(world, {"expected": 1, "instructions": "b"}).json()["version"] == 2
    assert patch(world, {"expected": 2}).json()["version"] == 3


def test_fields_left_out_stay_and_null_removes_limits(world: World) -> None:
    patch(world, EXAMPLE)

    only_budget = patch(world, {"expected": 1, "budget": None})
    assert only_budget.json() == {
        "version": 2,
        "instructions": EXAMPLE["instructions"],
        "concurrency": 2,
        "budget": None,
        "recall": "recent",
    }
    only_concurrency = patch(world, {"expected": 2, "concurrency": None})
    assert only_concurrency.json()["concurrency"] is None
    assert only_concurrency.json()["instructions"] == EXAMPLE["instructions"]
    cleared = patch(world, {"expected": 3, "instructions": ""})
    assert cleared.json()["instructions"] == ""
    pool = Pool.objects.get(bot=world.bot)
    assert pool.budget_period is None
    assert pool.budget_limit_micros is None
    assert pool.concurrency is None


def test_recall_is_recent_or_relevant(world: World) -> None:
    """[R3] Enrichment recall: `recent` by default, `relevant` on request; nothing else."""
    response = patch(world, {"expected": 0, "recall": "relevant"})
    assert response.status_code == 200
    assert response.json()["recall"] == "relevant"
    assert Pool.objects.get(bot=world.bot).recall == "relevant"
    bad = patch(world, {"expected": 1, "recall": "everything"})
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"recall"}
    assert patch(world, {"expected": 1, "recall": "recent"}).json()["recall"] == "recent"


@pytest.mark.parametrize("period", ["day", "month"])
def test_budget_periods(world: World, period: str) -> None:
    response = patch(world, {"expected": 0, "budget": {"period": period, "limitMicros": 0}})

    assert response.json()["budget"] == {"period": period, "limitMicros": 0}


def test_settings_do_not_change_the_pool_version(world: World) -> None:
    """[E7] The pool version counts memory changes; settings have their own version."""
    patch(world, EXAMPLE)

    memory = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory").json()

    assert memory["version"] == 0
