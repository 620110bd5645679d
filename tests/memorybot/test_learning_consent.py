"""[D4] "Don't learn from me": a person's `learnFromMe` and a channel's `learning`. Learning
neither receives nor applies their items (`refused: not_learnable`); others in the same group
chat are still learned from; enrichment and Remember are unchanged, and what was learned
before stays. The routes: `GET/PATCH /v1/me/settings`, `PATCH /v1/organizations/:orgId/
channels/:channelId`. The model's answers come from the fake server over real HTTP."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from chats.models import Chat, Item
from memory import services as memory
from memory.learned import Refusal, learned_changes_apply_in
from memory.models import Change
from memorybot.duty import reader_of_chat
from memorybot.learning import learning_run_process
from memorybot.learning_step import learning_range
from memorybot.models import LearningRun
from openbot import services
from tests.conftest import World, error_fields
from tests.factories import ChatFactory, ItemFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memorybot.learning_world import (
    confided_turn,
    fact_change,
    learned,
    learning_answer,
    learning_prompt,
    learning_requests,
    memory_bot_on,
    person_item,
    run_of,
)

CATS = "Between us: I am allergic to cats."
MARATHONS = "I run marathons."


def settings_patch(client: APIClient, body: Any) -> Any:
    return client.patch("/v1/me/settings", body, format="json")


def channel_patch(client: APIClient, org_id: str, channel_id: str, body: Any) -> Any:
    return client.patch(f"/v1/organizations/{org_id}/channels/{channel_id}", body, format="json")


@pytest.fixture
def group(world: World, fake_openai: FakeOpenAI) -> tuple[Chat, Item]:
    """alice's group chat in her channel: carol said something, then alice took a confided
    turn whose run reads both."""
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    cats = ItemFactory.create(chat=chat, person=world.carol.person, text=CATS)
    return chat, cats


def test_an_opted_out_persons_words_in_a_group_chat_are_neither_shown_nor_learned(
    world: World, fake_openai: FakeOpenAI, group: tuple[Chat, Item]
) -> None:
    chat, cats = group
    assert settings_patch(world.carol.client(), {"learnFromMe": False}).status_code == 200
    turn = confided_turn(chat, world.alice, MARATHONS)
    learning_answer(
        fake_openai,
        [
            fact_change("carol is allergic to cats", cats),
            fact_change("alice runs marathons", person_item(turn)),
        ],
    )
    run = run_of(turn)
    learning_run_process(run_id=run.id)

    [request] = learning_requests(fake_openai)
    assert MARATHONS in learning_prompt(request)
    assert "cats" not in learning_prompt(request)
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE
    assert run.refusals == [{"change": 0, "reason": "not_learnable"}]
    assert [entry.content for entry in learned(chat)] == ["alice runs marathons"]


def test_an_opted_out_persons_private_chat_calls_no_model(
    world: World, fake_openai: FakeOpenAI
) -> None:
    memory_bot_on(world)
    services.person_learning_set(person=world.alice.person, learn_from_me=False)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, MARATHONS)
    run = run_of(turn)
    learning_run_process(run_id=run.id)

    assert learning_requests(fake_openai) == []
    run.refresh_from_db()
    assert run.status == LearningRun.Status.DONE and run.error == ""
    assert learned(chat) == []
    assert Chat.objects.get(id=chat.id).read_position == turn.end_seq


def test_an_answer_that_arrives_after_the_opt_out_is_refused(world: World) -> None:
    """The person opts out while the step runs: the apply checks again."""
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    said = ItemFactory.create(chat=chat, person=world.alice.person, text=MARATHONS)
    services.person_learning_set(person=world.alice.person, learn_from_me=False)
    within = learning_range(LearningRun(end_seq=said.seq), chat, first_seq=1, bot_words=[])
    with memory.pool_change(pool_id=chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as change:
        refusals = learned_changes_apply_in(
            change,
            proposals=[fact_change("alice runs marathons", said)],
            within=within,
            reader=reader_of_chat(chat, world.alice.person.id),
        )
    assert refusals == [Refusal(change=0, reason="not_learnable")]
    assert learned(chat) == []


def test_a_channel_with_learning_off_is_not_learned_from(
    world: World, fake_openai: FakeOpenAI, group: tuple[Chat, Item]
) -> None:
    chat, _ = group
    response = channel_patch(
        world.alice.client(), world.org.id, world.channel.id, {"learning": False}
    )
    assert response.status_code == 200
    assert response.json() == {
        "id": world.channel.id,
        "name": world.channel.name,
        "learning": False,
    }
    turn = confided_turn(chat, world.alice, MARATHONS)
    learning_run_process(run_id=run_of(turn).id)

    assert learning_requests(fake_openai) == []
    assert learned(chat) == []
    # alice's private chat is still learned from.
    private = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(private, world.alice, MARATHONS)
    learning_answer(fake_openai, [fact_change("alice runs marathons", person_item(turn))])
    learning_run_process(run_id=run_of(turn).id)
    assert [entry.content for entry in learned(private)] == ["alice runs marathons"]


def test_what_was_learned_before_the_opt_out_stays(world: World, fake_openai: FakeOpenAI) -> None:
    memory_bot_on(world)
    chat = ChatFactory.create(owner=world.alice, bot=world.bot)
    turn = confided_turn(chat, world.alice, MARATHONS)
    learning_answer(fake_openai, [fact_change("alice runs marathons", person_item(turn))])
    learning_run_process(run_id=run_of(turn).id)
    services.person_learning_set(person=world.alice.person, learn_from_me=False)
    assert [entry.content for entry in learned(chat)] == ["alice runs marathons"]


# --- The routes -------------------------------------------------------------------------------


def test_my_settings_read_and_change(world: World) -> None:
    client = world.bob.client()
    assert client.get("/v1/me/settings").json() == {"learnFromMe": True}
    assert settings_patch(client, {"learnFromMe": False}).json() == {"learnFromMe": False}
    assert client.get("/v1/me/settings").json() == {"learnFromMe": False}
    # Another person's setting is theirs.
    assert world.alice.client().get("/v1/me/settings").json() == {"learnFromMe": True}


@pytest.mark.parametrize(
    "body", [{}, {"learnFromMe": "no"}, {"learnFromMe": None}, {"learnFromMe": 0}, []]
)
def test_bad_settings_are_a_400_naming_the_field(world: World, body: Any) -> None:
    response = settings_patch(world.bob.client(), body)
    assert response.status_code == 400
    assert error_fields(response)
    assert world.bob.client().get("/v1/me/settings").json() == {"learnFromMe": True}


def test_unknown_settings_are_a_400(world: World) -> None:
    response = settings_patch(world.bob.client(), {"learnFromMe": False, "learnFromAll": True})
    assert response.status_code == 400
    assert "learnFromAll" in error_fields(response)


def test_settings_need_a_token(world: World, anon: APIClient) -> None:
    assert anon.get("/v1/me/settings").status_code == 401
    assert settings_patch(anon, {"learnFromMe": False}).status_code == 401


@pytest.mark.parametrize(
    ("name", "status"),
    [("alice", 200), ("bob", 403), ("carol", 403), ("dave", 404)],
)
def test_only_the_organizations_admins_change_a_channel(
    world: World, name: str, status: int
) -> None:
    """alice is an admin of the organization; bob and carol are members (carol of the channel
    too); dave is another organization's admin."""
    client = world.actor(name).client()
    response = channel_patch(client, world.org.id, world.channel.id, {"learning": False})
    assert response.status_code == status
    world.channel.refresh_from_db()
    assert world.channel.learning is (status != 200)


def test_another_organizations_channel_is_a_404(world: World) -> None:
    theirs = services.channel_create(organization=world.other_org, members=[])
    response = channel_patch(world.alice.client(), world.org.id, theirs.id, {"learning": False})
    assert response.status_code == 404
    response = channel_patch(
        world.alice.client(), world.org.id, "chan_missing", {"learning": False}
    )
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.learning is True


@pytest.mark.parametrize("body", [{}, {"learning": "off"}, {"learning": None}, {"name": "x"}])
def test_a_bad_channel_change_is_a_400_naming_the_field(world: World, body: Any) -> None:
    response = channel_patch(world.alice.client(), world.org.id, world.channel.id, body)
    assert response.status_code == 400
    assert error_fields(response)


def test_the_routes_are_in_the_schema(anon: APIClient) -> None:
    paths = anon.get("/v1/schema", HTTP_ACCEPT="application/json").json()["paths"]
    assert {"get", "patch"} <= set(paths["/v1/me/settings"])
    assert "patch" in paths["/v1/organizations/{org_id}/channels/{channel_id}"]
