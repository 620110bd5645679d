"""[N1–N5, S2, S3, A6] Enrichment over HTTP with the memory bot on the fake OpenAI-compatible
server: which entries a turn may use (the person's own in a private chat, only the group's or
everyone's in a group chat), what is checked after the model named them, when no model call
is made, and what is stored and shown.
"""

import pytest
from django.db import connection

from chats import services as chat_services
from chats.models import Item
from memory.access import Reader
from memory.forgetting import entry_forget
from memory.models import Entry
from memorybot.enrichment import enrich_input
from memorybot.models import Enrichment, ModelCall
from memorybot.quoting import QUOTED_RULE
from openbot import services
from openbot.clock import day_of
from tests.conftest import World
from tests.factories import ChatFactory, EntryFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory.builders import fact, observation
from tests.memorybot.scenes import (
    FAKE_MODEL,
    OFFLINE_MODEL,
    bot_model_set,
    bot_requests,
    chat_of,
    chat_open,
    enrich_requests,
    enrichment_answer,
    last_user_text,
    memory_model_set,
    take_turn,
)

WORDS = "Which trail should I hike with my dog this weekend?"
ENRICHED = f"{WORDS} My dog Fennel is old and tires after five kilometres."


@pytest.fixture
def scene(world: World, fake_openai: FakeOpenAI) -> World:
    """The memory bot and the bot on the fake server."""
    memory_model_set(world.org, FAKE_MODEL)
    bot_model_set(world.bot, FAKE_MODEL)
    return world


def offered_ids(fake_openai: FakeOpenAI) -> list[str]:
    """The entry ids the memory bot was shown in its (only) enrichment request."""
    [request] = enrich_requests(fake_openai)
    notes = request.body["messages"][1]["content"]
    return [line[1 : line.index("]")] for line in notes.splitlines() if line.startswith("[mem_")]


def private_fact(world: World, content: str) -> Entry:
    """A fact alice said in an earlier private chat: for her only [V2]."""
    return fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot),
                person=world.alice.person,
                text=content,
            )
        ],
        content=content,
    )


def group_fact(world: World, content: str) -> Entry:
    """A fact said in a group chat of the channel: for the channel group [V2]."""
    group_chat = ChatFactory.create(owner=world.carol, bot=world.bot, channel=world.channel)
    return fact(
        [ItemFactory.create(chat=group_chat, person=world.carol.person, text=content)],
        content=content,
    )


# --- private chats [N1, N5] -----------------------------------------------------------------


def test_a_private_chat_uses_the_persons_entries(scene: World, fake_openai: FakeOpenAI) -> None:
    pinned = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old."
    )
    said = private_fact(scene, "Fennel tires after five kilometres.")
    EntryFactory.create(author=scene.bob, bot=scene.bot, content="Bob's dog Rex loves long trails.")
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(ENRICHED, [pinned.id, said.id]))
    fake_openai.reply(content="Take the short lake loop.")
    body = take_turn(scene.alice, chat_id, WORDS)

    assert sorted(offered_ids(fake_openai)) == sorted([pinned.id, said.id])  # not bob's
    [request] = enrich_requests(fake_openai)
    # [K2] The answer's shape: the new input and ids of the notes shown, no others.
    asked = request.body["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["strict"] is True
    entries = asked["json_schema"]["schema"]["properties"]["entries"]
    assert entries["items"]["enum"] == offered_ids(fake_openai)
    assert request.body["messages"][1]["content"].endswith(f"Message:\n{WORDS}")
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == ENRICHED  # [N3] the bot's model sees the new input
    assert body["items"][0]["text"] == WORDS  # the history keeps the person's words

    enrichment = Enrichment.objects.get()
    assert enrichment.turn_id == int(body["turn"]["id"])
    assert (enrichment.text, enrichment.original) == (ENRICHED, WORDS)
    assert enrichment.entry_ids == [pinned.id, said.id]
    listed = scene.alice.client().get(f"/v1/chats/{chat_id}/enrichments").json()
    [shown] = listed["enrichments"]
    assert shown["turn"] == body["turn"]["id"]
    assert (shown["text"], shown["original"], shown["entries"]) == (
        ENRICHED,
        WORDS,
        [pinned.id, said.id],
    )
    assert isinstance(shown["createdAt"], int)


def test_an_enrichment_is_encrypted_at_rest(scene: World, fake_openai: FakeOpenAI) -> None:
    pinned = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old."
    )
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(ENRICHED, [pinned.id]))
    take_turn(scene.alice, chat_id, WORDS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT text, original FROM memorybot_enrichment")
        [(text, original)] = cursor.fetchall()
    for raw in (text, original):
        assert "Fennel" not in raw and "trail" not in raw
    assert "Fennel" not in str(Enrichment.objects.get())


def test_the_offline_memory_bot_enriches_end_to_end(scene: World, fake_openai: FakeOpenAI) -> None:
    memory_model_set(scene.org, OFFLINE_MODEL)
    helps = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Fennel, the dog, tires after five kilometres."
    )
    EntryFactory.create(author=scene.alice, bot=scene.bot, content="The office moves in spring.")
    chat_id = chat_open(scene.alice, scene.bot)
    take_turn(scene.alice, chat_id, WORDS)
    [answer] = bot_requests(fake_openai)
    # [K6] The entry follows the person's words as a quoted note.
    # [R8] With the day it was said.
    said = day_of(Entry.objects.get(pk=helps.id).said_at)
    assert last_user_text(answer) == (
        f"{WORDS}\n\n<notes>\n{QUOTED_RULE}\n- Fennel, the dog, tires after five kilometres."
        f" (said {said})\n</notes>"
    )
    assert Enrichment.objects.get().entry_ids == [helps.id]
    assert ModelCall.objects.get(purpose="enrichment").model == OFFLINE_MODEL


def test_an_input_no_entry_helps_stays_and_nothing_is_stored(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    pinned = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old."
    )
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []))
    take_turn(scene.alice, chat_id, WORDS)
    fake_openai.reply(content=enrichment_answer("A rewrite naming no entry.", []))
    take_turn(scene.alice, chat_id, "Thanks!")
    fake_openai.reply(content=enrichment_answer("Same words", [pinned.id]))
    take_turn(scene.alice, chat_id, "Same words")
    assert [last_user_text(request) for request in bot_requests(fake_openai)] == [
        WORDS,
        "Thanks!",
        "Same words",
    ]
    assert Enrichment.objects.count() == 0


# --- what the model names is checked [N2, S3] -----------------------------------------------


@pytest.mark.parametrize("named", ["bobs", "unknown", "retracted"])
def test_an_entry_the_readers_may_not_use_keeps_the_input(
    scene: World, fake_openai: FakeOpenAI, named: str
) -> None:
    pinned = EntryFactory.create(
        author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old."
    )
    other = {
        "bobs": lambda: (
            EntryFactory.create(
                author=scene.bob, bot=scene.bot, content="Bob's dog Rex loves long trails."
            ).id
        ),
        "unknown": lambda: "mem_00000000000000000000",
        "retracted": lambda: retracted(scene),
    }[named]()
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(ENRICHED, [pinned.id, other]))
    take_turn(scene.alice, chat_id, WORDS)
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == WORDS
    assert Enrichment.objects.count() == 0


def retracted(world: World) -> str:
    """One of alice's entries that she took back [P1]: no longer active."""
    entry = EntryFactory.create(author=world.alice, bot=world.bot, content="Fennel used to swim.")
    reader = Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )
    entry_forget(pool_id=world.bot.id, reader=reader, entry_id=entry.id)
    return entry.id


# --- group chats [N2] -----------------------------------------------------------------------


@pytest.mark.parametrize("named", ["pinned", "private-fact", "other-persons-fact"])
def test_a_group_chat_never_uses_private_entries_even_when_the_model_names_them(
    scene: World, fake_openai: FakeOpenAI, named: str
) -> None:
    group = group_fact(scene, "The team hikes on Saturdays.")
    private = {
        "pinned": lambda: EntryFactory.create(
            author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old."
        ),
        "private-fact": lambda: private_fact(scene, "Fennel tires after five kilometres."),
        "other-persons-fact": lambda: fact(
            [
                ItemFactory.create(
                    chat=ChatFactory.create(owner=scene.carol, bot=scene.bot),
                    person=scene.carol.person,
                    text="Carol's knee hurts on hills.",
                )
            ],
            content="Carol's knee hurts on hills.",
        ),
    }[named]()
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    fake_openai.reply(content=enrichment_answer(ENRICHED, [group.id, private.id]))
    fake_openai.reply(content="Saturday works.")
    take_turn(scene.alice, chat_id, WORDS)

    assert offered_ids(fake_openai) == [group.id]  # the model was never shown it
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == WORDS
    assert Enrichment.objects.count() == 0


def test_a_group_chat_uses_the_groups_and_everyones_entries(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    group = group_fact(scene, "The team hikes on Saturdays.")
    everyone = observation([group], audience="for:bot", content="Hikes start at nine.")
    EntryFactory.create(author=scene.carol, bot=scene.bot, content="Carol's knee hurts on hills.")
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    enriched = f"{WORDS} The team hikes on Saturdays, starting at nine."
    fake_openai.reply(content=enrichment_answer(enriched, [group.id, everyone.id]))
    fake_openai.reply(content="Saturday at nine.")
    take_turn(scene.carol, chat_id, WORDS)  # a channel member's turn in alice's group chat
    assert sorted(offered_ids(fake_openai)) == sorted([group.id, everyone.id])
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == enriched
    assert Enrichment.objects.get().entry_ids == [group.id, everyone.id]


def test_a_group_chat_no_longer_uses_what_a_member_forgot(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    """[V10] Forget is "no longer for you": alice reads the group's answers too, so neither the
    forgotten entry nor a conclusion drawn from it is used there; carol still reads it."""
    group = group_fact(scene, "The team hikes on Saturdays.")
    everyone = observation([group], audience="for:bot", content="Hikes start at nine.")
    forget = {"command": {"_tag": "Forget", "id": group.id}}
    assert scene.alice.client().post(memory_url(scene), forget, format="json").status_code == 200
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    take_turn(scene.carol, chat_id, WORDS)
    assert enrich_requests(fake_openai) == []
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == WORDS
    alice_sees = scene.alice.client().get(memory_url(scene)).json()["entries"]
    carol_sees = scene.carol.client().get(memory_url(scene)).json()["entries"]
    assert [entry["id"] for entry in alice_sees] == []
    assert {entry["id"] for entry in carol_sees} == {group.id, everyone.id}


def memory_url(world: World) -> str:
    return f"/v1/bots/{world.bot.id}/memory"


def test_a_group_chat_with_only_private_entries_calls_no_model(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    EntryFactory.create(author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old.")
    private_fact(scene, "Fennel tires after five kilometres.")
    chat_id = chat_open(scene.alice, scene.bot, channel=scene.channel.id)
    take_turn(scene.alice, chat_id, WORDS)
    assert enrich_requests(fake_openai) == []
    assert not ModelCall.objects.filter(purpose="enrichment").exists()


# --- no model call [N1, N4, S2] -------------------------------------------------------------


def assert_no_enrichment(fake_openai: FakeOpenAI) -> None:
    assert enrich_requests(fake_openai) == []
    assert not ModelCall.objects.filter(purpose="enrichment").exists()
    assert Enrichment.objects.count() == 0
    [answer] = bot_requests(fake_openai)
    assert last_user_text(answer) == WORDS


def test_notices_are_never_enriched(scene: World, fake_openai: FakeOpenAI) -> None:
    EntryFactory.create(author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old.")
    chat = chat_of(chat_open(scene.alice, scene.bot))
    notice = "The trail to the lake is closed for the dog season."
    turn = chat_services.turn_start(chat=chat, person=None, text=notice, notice=True)
    item = Item.objects.get(chat=chat, seq=turn.input_seq)
    assert (item.kind, turn.person_id) == (Item.Kind.NOTICE, None)
    assert enrich_input(turn=turn, item=item) == notice
    chat_services.turn_end(turn=turn)
    assert fake_openai.requests == []
    assert not ModelCall.objects.exists()
    assert Enrichment.objects.count() == 0


@pytest.mark.parametrize("switch", ["bot-memory-off", "no-model"])
def test_without_the_memory_bot_the_input_stays(
    scene: World, fake_openai: FakeOpenAI, switch: str
) -> None:
    EntryFactory.create(author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old.")
    if switch == "bot-memory-off":
        services.organization_settings_update(organization=scene.org, bot_memory=False)
    else:
        memory_model_set(scene.org, None)
    chat_id = chat_open(scene.alice, scene.bot)
    take_turn(scene.alice, chat_id, WORDS)
    assert_no_enrichment(fake_openai)


@pytest.mark.parametrize("pool", ["empty", "others-only", "taken-back", "other-organization"])
def test_without_visible_entries_no_model_is_called(
    scene: World, fake_openai: FakeOpenAI, pool: str
) -> None:
    if pool == "others-only":
        EntryFactory.create(
            author=scene.bob, bot=scene.bot, content="Bob's dog Rex loves long trails."
        )
        fact(
            [
                ItemFactory.create(
                    chat=ChatFactory.create(owner=scene.bob, bot=scene.bot),
                    person=scene.bob.person,
                    text="Rex is three.",
                )
            ],
            content="Rex",
        )
    elif pool == "taken-back":
        retracted(scene)
    elif pool == "other-organization":
        # A shared bot: the same pool, but an entry from org B is never seen in org A [E3].
        linked = services.bot_link(bot=scene.bot, organization=scene.other_org)
        services.grant_set(bot=linked, level="read", organization=scene.other_org)
        EntryFactory.create(author=scene.dave, bot=scene.bot, content="Dave's dog Fennel is young.")
    chat_id = chat_open(scene.alice, scene.bot)
    take_turn(scene.alice, chat_id, WORDS)
    assert_no_enrichment(fake_openai)


def test_the_enrichment_prompt_asks_to_keep_every_request(
    scene: World, fake_openai: FakeOpenAI
) -> None:
    EntryFactory.create(author=scene.alice, bot=scene.bot, content="Alice's dog Fennel is old.")
    chat_id = chat_open(scene.alice, scene.bot)
    fake_openai.reply(content=enrichment_answer(WORDS, []))
    take_turn(scene.alice, chat_id, WORDS)
    [request] = enrich_requests(fake_openai)
    prompt = request.body["messages"][0]["content"]
    assert "Keep everything the person says and asks" in prompt
