"""[O6] The admin's "explain access" page on an entry: for a person (through a bot) or a
channel's group, visible or not and the first failing [V4] clause on each dependency."""

from typing import Any

from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from memory.access import Reader
from memory.forgetting import entry_forget
from memory.models import Entry
from openbot import services
from tests.conftest import CryptoSpy, World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation, set_status


def explain_page(staff: Client, entry: Entry, **params: str) -> str:
    response = staff.get(reverse("admin:memory_entry_explain", args=[quote(entry.id)]), params)
    assert response.status_code == 200
    return str(response.content.decode())


def group_world(world: World) -> tuple[Entry, Entry]:
    """carol's fact in the channel's group chat, and a conclusion over it for the group."""
    group = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel),
                person=world.carol.person,
            )
        ]
    )
    conclusion = observation([group], audience=f"for:channel:{world.channel.id}")
    return group, conclusion


def test_the_form_offers_the_pool_bot_and_its_links(world: World, staff: Client) -> None:
    group, _ = group_world(world)
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    text = explain_page(staff, group)
    assert 'id="explain-form"' in text
    assert f'value="{world.bot.id}"' in text and f'value="{linked.id}"' in text
    assert 'id="verdict"' not in text  # nothing asked yet


def test_a_person_who_may_see_it(world: World, staff: Client, crypto: CryptoSpy) -> None:
    _, conclusion = group_world(world)
    crypto.arm()
    text = explain_page(staff, conclusion, bot=world.bot.id, person=world.carol.person.id)
    assert "Visible:" in text and "may see" in text
    assert text.count('class="passing"') == 2 and 'class="failing"' not in text
    assert crypto.decrypted == []


def test_a_person_who_took_back_their_part(world: World, staff: Client) -> None:
    group, conclusion = group_world(world)
    alice = Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )
    entry_forget(pool_id=world.bot.id, reader=alice, entry_id=group.id)
    text = explain_page(staff, conclusion, bot=world.bot.id, person=world.alice.person.id)
    assert "Not visible:" in text
    # The conclusion itself passes; its source fails on (a) for her.
    assert text.count('class="passing"') == 1 and text.count('class="failing"') == 1
    assert "<code>excluded</code>" in text
    assert reverse("admin:memory_entry_change", args=[quote(group.id)]) in text


def test_a_channel_group_and_an_inactive_source(world: World, staff: Client) -> None:
    group, conclusion = group_world(world)
    set_status(group, Entry.Status.INVALIDATED)
    text = explain_page(staff, conclusion, bot=world.bot.id, channel=world.channel.id)
    assert "Not visible:" in text and f"the group of channel {world.channel.id}" in text
    assert "<code>not_active</code>" in text
    active = explain_page(staff, group, bot=world.bot.id, channel=world.channel.id, active="on")
    assert "active use" in active and "<code>not_active</code>" in active


def test_another_organization_through_a_linked_bot(world: World, staff: Client) -> None:
    group, _ = group_world(world)
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    text = explain_page(staff, group, bot=linked.id, person=world.dave.person.id)
    assert "Not visible:" in text and f"in {world.other_org.id}" in text
    assert "<code>org</code>" in text


def test_bad_questions_are_answered_on_the_form(world: World, staff: Client) -> None:
    group, _ = group_world(world)
    other_channel = services.channel_create(organization=world.other_org, members=[])
    cases: list[tuple[dict[str, Any], str]] = [
        ({"bot": world.bot.id}, "Give a person id or a channel id."),
        (
            {"bot": world.bot.id, "person": world.bob.person.id, "channel": world.channel.id},
            "Give a person id or a channel id.",
        ),
        ({"bot": world.bot.id, "person": "u_nobody"}, "No person with id u_nobody."),
        (
            {"bot": world.bot.id, "channel": other_channel.id},
            "the channel is in another organization than the bot",
        ),
        ({"bot": world.other_bot.id, "person": world.bob.person.id}, "Select a valid choice"),
    ]
    for params, message in cases:
        text = explain_page(staff, group, **params)
        assert message in text, params
        assert 'id="verdict"' not in text, params


def test_an_unknown_entry_is_a_404_and_outsiders_are_sent_to_log_in(
    world: World, staff: Client
) -> None:
    assert staff.get(reverse("admin:memory_entry_explain", args=["mem_nope"])).status_code == 404
    group, _ = group_world(world)
    response = Client().get(reverse("admin:memory_entry_explain", args=[quote(group.id)]))
    assert response.status_code == 302 and "/login/" in response["Location"]
