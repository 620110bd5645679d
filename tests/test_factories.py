"""The factories' defaults make a world the API itself accepts: each object is created by the
project's services, so the people in it reach it over HTTP as a client would."""

from typing import Any

from tests.factories import (
    ActorFactory,
    ChannelFactory,
    ChatFactory,
    EntryFactory,
    ItemFactory,
)


def test_an_item_and_an_entry_from_the_defaults(db: Any) -> None:
    item = ItemFactory.create(text="I like green tea.")
    chat = item.chat
    member = ActorFactory.create(organization=chat.organization)
    entry = EntryFactory.create(author=member, bot=chat.bot, content="call me Al")

    assert member.client().get(f"/v1/chats/{chat.id}").status_code == 404  # not their chat
    memory = member.client().get(f"/v1/bots/{chat.bot_id}/memory").json()
    assert [found["id"] for found in memory["entries"]] == [entry.id]  # the bot is readable
    assert item.turn is not None and item.turn.ended_at is not None  # [C6]


def test_a_group_chat_is_open_to_the_channels_members(db: Any) -> None:
    owner = ActorFactory.create()
    member = ActorFactory.create(organization=owner.organization)
    channel = ChannelFactory.create(
        organization=owner.organization, members=[owner.person, member.person]
    )
    chat = ChatFactory.create(owner=owner, channel=channel)

    assert member.client().get(f"/v1/chats/{chat.id}").json()["channel"] == channel.id
