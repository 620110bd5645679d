"""[R3] Enrichment recall over HTTP, with the memory bot on the fake OpenAI-compatible server:
`recent` offers the newest entries [S1] (an old entry that would help never reaches the model
once newer ones fill the context); `relevant` offers the entries that match the person's input,
most relevant first [R1], and nothing that does not match."""

import pytest

from tests.conftest import World
from tests.factories import EntryFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.scenes import (
    FAKE_MODEL,
    bot_model_set,
    chat_open,
    enrich_requests,
    enrichment_answer,
    memory_model_set,
    take_turn,
)

WORDS = "Which trail should I hike with my dog this weekend?"


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    return world


def recall_set(world: World, recall: str) -> None:
    url = f"/v1/bots/{world.bot.id}/memory/bot"
    version = world.alice.client().get(url).json()["version"]
    response = world.alice.client().patch(
        url, {"expected": version, "recall": recall}, format="json"
    )
    assert response.status_code == 200, response.json()


def offered(fake_openai: FakeOpenAI) -> list[str]:
    [request] = enrich_requests(fake_openai)
    notes = request.body["messages"][1]["content"]
    return [line[1 : line.index("]")] for line in notes.splitlines() if line.startswith("[mem_")]


def pool(world: World) -> tuple[str, str, list[str]]:
    """An old entry about the dog, one about a trail, then 40 newer ones about invoices that
    fill the 4,000 characters of context on their own."""
    dog = EntryFactory.create(
        author=world.alice, bot=world.bot, content="Alice's dog Fennel is old and tires after 5 km."
    ).id
    trail = EntryFactory.create(
        author=world.alice, bot=world.bot, content="The lake trail is flat and shaded."
    ).id
    fillers = [
        EntryFactory.create(
            author=world.alice,
            bot=world.bot,
            content=f"Quarterly invoice number {n} went to accounting on time, signed by finance "
            "and archived in the shared folder of the controlling department.",
        ).id
        for n in range(40)
    ]
    return dog, trail, fillers


@pytest.mark.parametrize("recall", ["recent", "relevant"])
def test_recall_chooses_what_the_model_is_offered(
    scene: World, fake_openai: FakeOpenAI, recall: str
) -> None:
    dog, trail, fillers = pool(scene)
    if recall == "relevant":
        recall_set(scene, recall)
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(f"{WORDS} Fennel is old.", [dog]))
    fake_openai.reply(content="Take the lake trail.")
    take_turn(scene.alice, chat_id, WORDS)
    shown = offered(fake_openai)
    if recall == "recent":
        # [S1] Memory order: the newest entries fill the context; the old ones never show.
        assert dog not in shown and trail not in shown
        assert shown == fillers[::-1][: len(shown)]
    else:
        assert sorted(shown) == sorted([dog, trail])
        assert set(shown).isdisjoint(fillers)


def test_relevant_recall_without_a_match_makes_no_model_call(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """[S2, N4] No matching entry: nothing helps, so the model is not asked."""
    pool(scene)
    recall_set(scene, "relevant")
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content="Hello.")
    body = take_turn(scene.alice, chat_id, "Good morning, how are you?")
    assert enrich_requests(fake_openai) == []
    assert body["items"][0]["text"] == "Good morning, how are you?"
