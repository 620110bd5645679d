"""[R8] Temporal cues: the time a question names (`memory.when`), and search preferring what
was said in it, over HTTP."""

from datetime import UTC, datetime

import pytest

from memory.when import asks, only_asks, time_named
from tests.conftest import World

# Thursday 2026-12-03, 15:00 UTC.
NOW = int(datetime(2026, 12, 3, 15, tzinfo=UTC).timestamp() * 1000)


def day(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("What did I eat on 2026-05-08?", ("2026-05-08", "2026-05-09")),
        ("what happened on 8 May 2026", ("2026-05-08", "2026-05-09")),
        ("What happened on the 8th of May, 2026?", ("2026-05-08", "2026-05-09")),
        ("anything on May 8, 2026", ("2026-05-08", "2026-05-09")),
        ("Was war am 8. Mai 2026?", ("2026-05-08", "2026-05-09")),
        ("Which hobby did Anna pick up in March 2026?", ("2026-03-01", "2026-04-01")),
        ("Was hat Jonas im Dezember 2025 gekauft?", ("2025-12-01", "2026-01-01")),
        # A month alone: its last one not after today.
        ("What did we plan in May?", ("2026-05-01", "2026-06-01")),
        ("Was hast du im Dezember gesagt?", ("2026-12-01", "2027-01-01")),
        ("the trip in 2025", ("2025-01-01", "2026-01-01")),
        ("what did I say yesterday", ("2026-12-02", "2026-12-03")),
        ("Was habe ich gestern gesagt?", ("2026-12-02", "2026-12-03")),
        ("the recipe from today", ("2026-12-03", "2026-12-04")),
        ("What did Ben say 3 days ago?", ("2026-11-29", "2026-12-02")),
        ("vor zwei Tagen", ("2026-11-30", "2026-12-03")),
        ("What did I tell you last week?", ("2026-11-23", "2026-11-30")),
        ("Was war letzte Woche?", ("2026-11-23", "2026-11-30")),
        ("this week", ("2026-11-30", "2026-12-07")),
        ("last month", ("2026-11-01", "2026-12-01")),
        ("Was war letzten Monat?", ("2026-11-01", "2026-12-01")),
        ("last year", ("2025-01-01", "2026-01-01")),
        ("Was war im Jan.?", ("2026-01-01", "2026-02-01")),
        # From a time on: until the end of today.
        ("What has Ben said since May?", ("2026-05-01", "2026-12-04")),
        ("Was hat Ben seit Mai gesagt?", ("2026-05-01", "2026-12-04")),
        ("since 8 May 2026", ("2026-05-08", "2026-12-04")),
        ("Was ist seit dem 8. Mai 2026 passiert?", ("2026-05-08", "2026-12-04")),
        ("What has Ben said since last week?", ("2026-11-23", "2026-12-04")),
        ("Was ist seit gestern passiert?", ("2026-12-02", "2026-12-04")),
        ("seit dem Jahr 2025", ("2025-01-01", "2026-12-04")),
        ("seit 2025", ("2025-01-01", "2026-12-04")),
        ("What happened since  May?", ("2026-05-01", "2026-12-04")),
        ("Was ist seit dem Mai passiert?", ("2026-05-01", "2026-12-04")),
    ],
)
def test_the_time_a_question_names(query: str, window: tuple[str, str]) -> None:
    named = time_named(query, NOW)
    assert named is not None
    assert named.window == (day(window[0]), day(window[1]))


@pytest.mark.parametrize(
    ("query", "rest"),
    [
        ("Which hobby did Anna pick up in March 2026?", "which hobby did anna pick up?"),
        ("Was hat Jonas im Dezember 2025 gekauft?", "was hat jonas gekauft?"),
        ("What did I eat on 2026-05-08?", "what did i eat?"),
        ("What did I tell you last week?", "what did i tell you?"),
        ("Was hat Ben seit Mai gesagt?", "was hat ben gesagt?"),
        ("What has Ben said since last week?", "what has ben said?"),
        ("vor zwei Tagen", ""),
    ],
)
def test_the_rest_of_a_question_is_what_it_asks_about(query: str, rest: str) -> None:
    """[R8] The words that name the time are no clue to what was said in it."""
    named = time_named(query, NOW)
    assert named is not None
    assert named.rest == rest


@pytest.mark.parametrize(
    "query",
    [
        "When did Anna adopt the puppy?",
        "May I ask where Ben lives?",
        "What is 2026 minus 5?",
        "Which room is 12-05?",
        "What happened on 31 June 2026?",  # no such day
        "Wann hat Mira Geburtstag?",
        "What did I get on Jan's birthday?",
    ],
)
def test_no_time_named(query: str) -> None:
    assert time_named(query, NOW) is None


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("When did Anna adopt the puppy?", True),
        ("what did I say last week", True),
        ("Was habe ich gestern gesagt", True),
        ("Tell me what we planned in May", True),
        ("I move to Berlin in May.", False),
        ("See you today", False),
        ("Ich ziehe im Mai um.", False),
    ],
)
def test_a_question_or_a_statement(text: str, question: bool) -> None:
    assert asks(text) is question


@pytest.mark.parametrize(
    ("text", "only"),
    [
        ("How is your family doing?", True),
        ("Anna: How is your family doing? Did the move go well?  ", True),
        ("I'm back from Paris! Have you been?", False),
        ("We adopted a puppy. His name is Rocky.", False),
        ("What a story.", False),
    ],
)
def test_an_entry_that_only_asks(text: str, only: bool) -> None:
    """[R6] What search weighs down: a line that asks and says nothing."""
    assert only_asks(text) is only


def test_search_prefers_what_was_said_in_the_time_a_question_names(world: World) -> None:
    def remember(content: str, said_at: int) -> str:
        response = world.alice.client().post(
            f"/v1/bots/{world.bot.id}/memory",
            {"command": {"_tag": "Remember", "content": content, "saidAt": said_at}},
            format="json",
        )
        assert response.status_code == 201, response.json()
        entry_id: str = response.json()["id"]
        return entry_id

    def found(query: str) -> list[str]:
        response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory/search", {"q": query})
        assert response.status_code == 200, response.json()
        return [entry["id"] for entry in response.json()["entries"]]

    # The same words, said a year apart; an entry of that March that does not match.
    march = remember("We planned a trip to the coast.", day("2025-03-14"))
    later = remember("We planned a trip to the coast!", day("2026-03-14"))
    unrelated = remember("Our neighbour repainted the fence.", day("2025-03-20"))

    assert found("What about the trip to the coast in March 2025?") == [march, later]
    assert found("trip to the coast in March 2026?") == [later, march]
    assert unrelated not in found("Which coast in March 2025?"), "a time alone finds nothing"
    # A statement that names a time does not ask about it: memory order decides.
    assert found("We plan a trip to the coast in March 2025.") == [later, march]
    # The words that name the time are not matched: a sale said in another March is not found.
    sale = remember("The March sale ends soon.", day("2024-03-02"))
    assert found("What did we plan in March 2025?") == [march, later]
    assert sale in found("the March sale")
    # Each result says when it was said.
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory/search", {"q": "coast"})
    said = {entry["id"]: entry["saidAt"] for entry in response.json()["entries"]}
    assert said == {march: day("2025-03-14"), later: day("2026-03-14")}
