"""[U1] Every view of `/me/` against the owner of what it shows, another person of the same
organization, an outsider and a signed-out browser; and what each does, through the same
services as the API (`GET memory` shows the result)."""

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client, override_settings

from memory.models import Entry
from openbot.models import Bot
from tests.conftest import Actor, World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, set_status
from tests.memorybot.learning_world import private_fact
from tests.people.signing_in import listed_ids, signed_in

SECRET = "Alice keeps her spare key under the blue flowerpot."


@dataclass
class Scene:
    world: World
    entry: Entry
    chat_id: str

    def client(self, who: str) -> Client:
        if who == "signed out":
            return Client()
        actor: Actor = self.world.actor(who)
        return signed_in(actor.person, actor.organization)


@pytest.fixture
def scene(world: World) -> Scene:
    """alice's private fact, learned from her chat with the bot."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    entry = fact([ItemFactory.create(chat=chat, person=world.alice.person)], content=SECRET)
    return Scene(world, entry, chat.id)


def api_memory(actor: Actor, bot: Bot) -> list[dict[str, Any]]:
    response = actor.client().get(f"/v1/bots/{bot.id}/memory")
    assert response.status_code == 200
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


# The views, each as (method, path of the scene): `{bot}`, `{entry}`, `{chat}` filled in.
VIEWS = {
    "home": ("get", "/me/"),
    "bot": ("get", "/me/bots/{bot}/"),
    "bot history": ("get", "/me/bots/{bot}/?history=1"),
    "search": ("get", "/me/bots/{bot}/?q=flowerpot"),
    "remember": ("post", "/me/bots/{bot}/remember"),
    "forget, asked": ("get", "/me/bots/{bot}/entries/{entry}/forget"),
    "forget": ("post", "/me/bots/{bot}/entries/{entry}/forget"),
    "forget everything, asked": ("get", "/me/bots/{bot}/forget-everything"),
    "forget everything": ("post", "/me/bots/{bot}/forget-everything"),
    "chat": ("get", "/me/chats/{chat}/"),
    "export": ("get", "/me/export"),
    "learning setting": ("post", "/me/learning"),
}
# What each person gets: the status, and whether alice's entry is shown.
OWNER = {
    "home": 200,
    "bot": 200,
    "bot history": 200,
    "search": 200,
    "remember": 302,
    "forget, asked": 200,
    "forget": 302,
    "forget everything, asked": 200,
    "forget everything": 302,
    "chat": 200,
    "export": 200,
    "learning setting": 302,
}
# bob reads the bot (the organization's grant) but not alice's entry or chat.
OTHER_PERSON = OWNER | {"forget, asked": 404, "forget": 404, "chat": 404}
# dave works in another organization: the bot, the entry and the chat are not found.
OUTSIDER = {name: 404 for name in VIEWS} | {"home": 200, "export": 200, "learning setting": 302}
SIGNED_OUT = {name: 401 for name in VIEWS}
MATRIX = {"alice": OWNER, "bob": OTHER_PERSON, "dave": OUTSIDER, "signed out": SIGNED_OUT}


@pytest.mark.parametrize("who", list(MATRIX))
@pytest.mark.parametrize("view", list(VIEWS))
def test_permission_matrix(scene: Scene, who: str, view: str) -> None:
    method, path = VIEWS[view]
    url = path.format(bot=scene.world.bot.id, entry=scene.entry.id, chat=scene.chat_id)
    client = scene.client(who)
    call: Callable[..., Any] = getattr(client, method)
    response = call(url, {"content": "I like tea."} if view == "remember" else None)
    assert response.status_code == MATRIX[who][view], (who, view)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    shows_secret = SECRET.encode() in body
    assert shows_secret == (
        who == "alice" and view in {"bot", "bot history", "search", "forget, asked", "export"}
    ), (who, view)
    if view == "export" and response.status_code == 200:
        document = json.loads(body)
        assert document["person"]["id"] == scene.world.actor(who).person.id
    # The setting is each person's own: only theirs changes.
    for name in ("alice", "bob", "dave"):
        person = scene.world.actor(name).person
        person.refresh_from_db()
        assert person.learn_from_me != (name == who and view == "learning setting"), (who, view)
    entry = Entry.objects.get(id=scene.entry.id)
    # Only alice's own Forget (or forgetting everything) takes her entry back.
    forgotten = who == "alice" and view in {"forget", "forget everything"}
    assert (entry.status == Entry.Status.ACTIVE) != forgotten, (who, view)


def test_learning_from_me_is_switched_off_and_on(scene: Scene) -> None:
    """[D4] The page's switch is `learnFromMe`, as GET /v1/me/settings shows it."""
    bob, api = scene.client("bob"), scene.world.bob.client()
    off = bob.post("/me/learning", {"learn": "off"}, follow=True)
    assert b"Bots no longer learn from what you say." in off.content
    assert b"Learn from what I say again" in off.content
    assert api.get("/v1/me/settings").json() == {"learnFromMe": False}
    on = bob.post("/me/learning", {"learn": "on"}, follow=True)
    assert b"Stop learning from what I say" in on.content
    assert api.get("/v1/me/settings").json() == {"learnFromMe": True}


def test_the_page_lists_what_get_memory_lists(scene: Scene) -> None:
    world = scene.world
    private_fact(world, world.bob, "Bob's private note.")
    group = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    fact([ItemFactory.create(chat=group, person=world.carol.person)], content="Carol's group note.")
    for name in ("alice", "bob", "carol"):
        actor = world.actor(name)
        page = scene.client(name).get(f"/me/bots/{world.bot.id}/?history=1")
        assert listed_ids(page.content) == [entry["id"] for entry in api_memory(actor, world.bot)]


def test_an_entry_shows_where_it_was_learned(scene: Scene) -> None:
    page = scene.client("alice").get(f"/me/bots/{scene.world.bot.id}/").content.decode()
    assert f'href="/me/chats/{scene.chat_id}/"' in page and "your chat" in page
    assert "a fact" in page and "said <time datetime=" in page
    runs = scene.client("alice").get(f"/me/chats/{scene.chat_id}/")
    assert runs.status_code == 200 and b"Nothing has been learned" in runs.content


def test_remember_stores_a_pinned_entry_only_the_person_sees(scene: Scene) -> None:
    world, alice = scene.world, scene.client("alice")
    response = alice.post(
        f"/me/bots/{world.bot.id}/remember",
        {"content": "  I prefer green tea.  ", "topics": "Drinks, tea"},
        follow=True,
    )
    assert b"Remembered." in response.content
    [pinned] = [entry for entry in api_memory(world.alice, world.bot) if entry["layer"] == "pinned"]
    assert pinned["content"] == "I prefer green tea."
    assert {"drinks", "tea"} <= set(pinned["tags"])
    assert "I prefer green tea." not in str(api_memory(world.bob, world.bot))
    assert pinned["id"] in listed_ids(response.content)


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"content": "   "}, b"Write what the bot should remember."),
        ({"content": "x" * 5000}, b"at most"),
        ({"content": "I like tea.", "topics": "tea:time"}, b"tags must be topics"),
        ({"content": "I like tea.", "topics": " ".join(f"t{n}" for n in range(33))}, b"At most 32"),
        ({"content": "I like\x00 tea."}, b"NUL"),
    ],
)
def test_remember_refused_keeps_what_was_written(
    scene: Scene, form: dict[str, str], message: bytes
) -> None:
    before = api_memory(scene.world.alice, scene.world.bot)
    response = scene.client("alice").post(f"/me/bots/{scene.world.bot.id}/remember", form)
    assert response.status_code == 400 and message in response.content
    assert form["content"].strip("\x00").encode()[:6] in response.content
    # The page it answers on still searches and filters the bot's page, not the form's URL.
    page = f"/me/bots/{scene.world.bot.id}/"
    assert f'action="{page}"'.encode() in response.content
    assert b'href="?' not in response.content
    assert api_memory(scene.world.alice, scene.world.bot) == before


def test_forget_takes_the_entry_back_as_the_api_does(scene: Scene) -> None:
    world, alice = scene.world, scene.client("alice")
    asked = alice.get(f"/me/bots/{world.bot.id}/entries/{scene.entry.id}/forget")
    assert b"Forget this?" in asked.content and SECRET.encode() in asked.content
    done = alice.post(f"/me/bots/{world.bot.id}/entries/{scene.entry.id}/forget", follow=True)
    assert b"Forgotten." in done.content
    assert scene.entry.id not in listed_ids(done.content)
    # As GET memory: a retracted entry is gone from the history too, and cannot be forgotten
    # again.
    assert api_memory(world.alice, world.bot) == []
    assert listed_ids(alice.get(f"/me/bots/{world.bot.id}/?history=1").content) == []
    again = alice.post(f"/me/bots/{world.bot.id}/entries/{scene.entry.id}/forget")
    assert again.status_code == 404


def test_the_history_shows_what_is_no_longer_used(scene: Scene) -> None:
    world, alice = scene.world, scene.client("alice")
    set_status(scene.entry, Entry.Status.INVALIDATED)
    assert listed_ids(alice.get(f"/me/bots/{world.bot.id}/").content) == []
    history = alice.get(f"/me/bots/{world.bot.id}/?history=1").content
    assert listed_ids(history) == [scene.entry.id] and b"no longer used" in history
    assert f"/entries/{scene.entry.id}/forget".encode() not in history


def test_forget_everything_is_forget_mine(scene: Scene) -> None:
    world, alice = scene.world, scene.client("alice")
    alice.post(f"/me/bots/{world.bot.id}/remember", {"content": "I prefer green tea."})
    private_fact(world, world.bob, "Bob's private note.")
    done = alice.post(f"/me/bots/{world.bot.id}/forget-everything", follow=True)
    assert b"Forgotten: 2 entries." in done.content
    assert listed_ids(done.content) == []
    assert all(entry["status"] != "active" for entry in api_memory(world.alice, world.bot))
    assert [entry["status"] for entry in api_memory(world.bob, world.bot)] == ["active"]


def test_search_and_topics_narrow_the_list(scene: Scene) -> None:
    world, alice = scene.world, scene.client("alice")
    alice.post(
        f"/me/bots/{world.bot.id}/remember", {"content": "I prefer green tea.", "topics": "tea"}
    )
    found = alice.get(f"/me/bots/{world.bot.id}/", {"q": "where is the spare key"})
    assert listed_ids(found.content) == [scene.entry.id]
    tea = alice.get(f"/me/bots/{world.bot.id}/", {"topic": "tea"})
    assert [entry.encode() for entry in listed_ids(tea.content)] != []
    assert SECRET.encode() not in tea.content and b"I prefer green tea." in tea.content
    refused = alice.get(f"/me/bots/{world.bot.id}/", {"q": "word " * 65})
    assert refused.status_code == 400 and b"at most 1000 characters and 64 words" in refused.content
    assert listed_ids(refused.content) == []
    # A topic written decomposed (NFD) finds the entries its composed form tags.
    alice.post(
        f"/me/bots/{world.bot.id}/remember", {"content": "I drink café au lait.", "topics": "café"}
    )
    decomposed = alice.get(
        f"/me/bots/{world.bot.id}/", {"topic": unicodedata.normalize("NFD", "café")}
    )
    assert b"I drink caf" in decomposed.content and len(listed_ids(decomposed.content)) == 1


def test_an_unknown_bot_entry_or_chat_is_not_found(scene: Scene) -> None:
    alice = scene.client("alice")
    for path in (
        "/me/bots/bot_nope/",
        f"/me/bots/{scene.world.bot.id}/entries/e_nope/forget",
        "/me/chats/c_nope/",
    ):
        response = alice.get(path)
        assert response.status_code == 404 and b"Not found" in response.content


def test_changes_beyond_the_persons_write_rate_are_refused(scene: Scene) -> None:
    """[T1] The page's writes count with the person's API writes; reading is not limited."""
    world, alice = scene.world, scene.client("alice")
    remember = f"/me/bots/{world.bot.id}/remember"
    cache.clear()
    with override_settings(
        OPENBOT_THROTTLE_RATES={"token": None, "writes": "2/min", "auth_failures": None}
    ):
        assert alice.post(remember, {"content": "I like tea."}).status_code == 302
        api = world.alice.client().post(
            f"/v1/bots/{world.bot.id}/memory",
            {"command": {"_tag": "Remember", "content": "I like coffee."}},
            format="json",
        )
        assert api.status_code == 201
        refused = alice.post(remember, {"content": "I like cocoa."})
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
        assert b"Nothing was changed." in refused.content
        assert alice.get(f"/me/bots/{world.bot.id}/").status_code == 200
    cache.clear()
    contents = {entry["content"] for entry in api_memory(world.alice, world.bot)}
    assert contents == {SECRET, "I like tea.", "I like coffee."}
