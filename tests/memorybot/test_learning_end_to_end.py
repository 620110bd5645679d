"""[F4, W1, W2, N1–N3, V2, A1, A3, A6] End to end over HTTP, with the bot's model and the
memory bot's model on the fake server: a person says something in a private chat, the bot
confides, the turn ends, a real Dramatiq worker learns a fact; the person's next input is
enriched with it; in a group chat of the same bot nobody is offered it, and only the person
sees it in `GET memory` and in the log."""

import json
from typing import Any

import pytest
from dramatiq.brokers.redis import RedisBroker

from conversations.turns import BOT_PROMPT
from memorybot.enrichment import ENRICH_PROMPT
from memorybot.learning_step import LEARN_PROMPT
from memorybot.models import LearningRun
from memorybot.tasks import learn
from openbot import services
from openbot.models import Bot
from tests.conftest import Actor, World
from tests.fakes.openai_server import FakeOpenAI, ReceivedRequest
from tests.memorybot.learning_world import flush_broker, learning_worker, memory_bot_on

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "vegetarian"


def system_prompt(request: ReceivedRequest) -> str:
    content: str = request.body["messages"][0]["content"]
    return content


def post(actor: Actor, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = actor.client().post(path, body, format="json")
    assert response.status_code in (200, 201), response.json()
    result: dict[str, Any] = response.json()
    return result


def get(actor: Actor, path: str) -> dict[str, Any]:
    response = actor.client().get(path)
    assert response.status_code == 200, response.json()
    result: dict[str, Any] = response.json()
    return result


def take_turn(actor: Actor, chat_id: str, text: str) -> dict[str, Any]:
    return post(actor, f"/v1/chats/{chat_id}/turns", {"text": text})


@pytest.fixture
def talker(world: World) -> Bot:
    """A bot whose own model is on the fake server too; org A may read it, alice write."""
    bot = services.bot_create(organization=world.org, name="talker", model="openai:gpt-test")
    services.grant_set(bot=bot, level="read", organization=world.org)
    services.grant_set(bot=bot, level="write", person=world.alice.person)
    return bot


def test_a_confided_turn_teaches_the_bot_only_what_its_people_may_see(
    world: World, fake_openai: FakeOpenAI, talker: Bot
) -> None:
    flush_broker()
    memory_bot_on(world)
    alice, carol, bob = world.alice, world.carol, world.bob
    private = post(alice, "/v1/chats", {"bot": talker.id})["id"]

    # Turn 1: alice speaks; the bot confides, hears the reply and answers. No entries yet,
    # so no enrichment call [S2].
    fake_openai.reply(content=None, tool_calls=[("confide", {"text": "Did I get her diet?"})])
    fake_openai.reply(content="Listen, it is fine. Tell her openly.")
    fake_openai.reply(content="Noted, no meat in your recipes.")
    first = take_turn(alice, private, "I am vegetarian, keep that in mind for recipes.")
    said = first["items"][0]
    assert said["kind"] == "person" and first["items"][1]["text"].startswith("Noted")
    assert [system_prompt(r) for r in fake_openai.requests][0] == BOT_PROMPT
    (run,) = LearningRun.objects.all()
    assert run.status == LearningRun.Status.WAITING

    # The turn's end sent the run to the broker [W2]; a worker learns from it.
    fake_openai.reply(
        content=json.dumps(
            {
                "changes": [
                    {
                        "kind": "add",
                        "layer": "fact",
                        "content": "alice is vegetarian",
                        "sources": [{"chat": private, "item": said["id"]}],
                        "topics": ["food"],
                    }
                ]
            }
        )
    )
    with learning_worker():
        pass
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE and run.refusals == []
    learning = fake_openai.requests[-1]
    assert system_prompt(learning) == LEARN_PROMPT
    assert (
        "I am vegetarian, keep that in mind for recipes." in learning.body["messages"][1]["content"]
    )

    # [A1, V2] alice sees the fact; carol and bob do not.
    (entry,) = get(alice, f"/v1/bots/{talker.id}/memory")["entries"]
    assert entry["content"] == "alice is vegetarian" and entry["layer"] == "fact"
    assert entry["sources"] == [{"chat": private, "item": said["id"]}]
    assert set(entry["tags"]) == {
        f"from:{alice.person.id}",
        f"for:person:{alice.person.id}",
        f"org:{world.org.id}",
        f"chat:{private}",
        "food",
    }
    for other in (carol, bob):
        assert get(other, f"/v1/bots/{talker.id}/memory")["entries"] == []
    # [A3] The log shows the change to alice only.
    changes = get(alice, f"/v1/bots/{talker.id}/memory/log")["changes"]
    assert [(c["by"], c["ids"]) for c in changes] == [("memory_bot", [entry["id"]])]
    for other in (carol, bob):
        assert get(other, f"/v1/bots/{talker.id}/memory/log")["changes"] == []

    # Turn 2: alice's next input is enriched with it [N1]; the bot sees the new input, the
    # chat keeps her words [N3].
    asked = len(fake_openai.requests)
    enriched = "What should I cook tonight? I do not eat meat: I am vegetarian."
    fake_openai.reply(content=json.dumps({"text": enriched, "entries": [entry["id"]]}))
    fake_openai.reply(content="A chickpea curry.")
    second = take_turn(alice, private, "What should I cook tonight?")
    enrichment, answer = fake_openai.requests[asked:]
    assert system_prompt(enrichment) == ENRICH_PROMPT
    assert "alice is vegetarian" in enrichment.body["messages"][1]["content"]
    assert answer.body["messages"][-1] == {"role": "user", "content": enriched}
    assert second["items"][0]["text"] == "What should I cook tonight?"
    (stored,) = get(alice, f"/v1/chats/{private}/enrichments")["enrichments"]
    assert (stored["text"], stored["original"], stored["entries"]) == (
        enriched,
        "What should I cook tonight?",
        [entry["id"]],
    )

    # A group chat of the same bot: its readers are the channel group [N2, W5]. Neither
    # carol nor alice (a member too) is offered alice's private fact, and no model call
    # is made for enrichment at all [S2].
    group = post(carol, "/v1/chats", {"bot": talker.id, "channel": world.channel.id})["id"]
    asked = len(fake_openai.requests)
    fake_openai.reply(content="Pasta for everyone.")
    fake_openai.reply(content="A big salad.")
    take_turn(carol, group, "What should we cook for the team lunch?")
    take_turn(alice, group, "Any ideas for the team lunch?")
    in_group = fake_openai.requests[asked:]
    assert [system_prompt(request) for request in in_group] == [BOT_PROMPT, BOT_PROMPT]
    assert all(SECRET not in json.dumps(request.body) for request in in_group)
    assert get(carol, f"/v1/chats/{group}/enrichments")["enrichments"] == []
    assert get(carol, f"/v1/bots/{talker.id}/memory")["entries"] == []
    assert carol.client().get(f"/v1/chats/{private}/enrichments").status_code == 404

    # Only the confided turn stored a run [F4].
    assert LearningRun.objects.count() == 1


def test_a_broker_that_is_down_fails_no_turn_and_loses_no_run(
    world: World, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[W2] All durable state lives in the database: if the broker cannot take the message
    when the turn ends, the person still gets the answer, and the recovery pass sends the
    run once the broker is back."""
    flush_broker()
    memory_bot_on(world)
    configured = learn.broker
    monkeypatch.setattr(learn, "broker", RedisBroker(url="redis://127.0.0.1:1/0", middleware=[]))
    chat = post(world.alice, "/v1/chats", {"bot": world.bot.id})["id"]

    response = world.alice.client().post(
        f"/v1/chats/{chat}/turns", {"text": "I am vegetarian."}, format="json"
    )

    assert response.status_code == 201, response.content
    (run,) = LearningRun.objects.all()
    assert run.status == LearningRun.Status.WAITING
    monkeypatch.setattr(learn, "broker", configured)  # the broker is back
    fake_openai.reply(content=json.dumps({"changes": []}))
    with learning_worker():  # its recovery pass on boot sends the run
        pass
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE
