"""factory_boy factories for the tests' worlds, one per kind of object a test builds.

Every factory creates through the project's own services (`_create`), never with
`objects.create`, so a test's world is made by the code users run (STYLE "Tests"): an
organization, a person with a membership (an `Actor` also holds a token), a bot, a grant, a
channel, a chat, an item of a turn that ended, a pinned entry. Learned entries (facts and
observations with their evidence) are built in `tests/memory/builders.py`.
"""

from dataclasses import dataclass
from typing import Any

import factory
from rest_framework.test import APIClient

from chats import services as chat_services
from chats.models import Chat, Item
from memory.models import Entry
from memory.services import entry_remember
from openbot import services
from openbot.access import Caller
from openbot.models import Bot, Channel, Grant, Organization, Person


@dataclass
class Actor:
    """A person of one organization with a token for it: who a test acts as."""

    person: Person
    organization: Organization
    token: str

    @property
    def caller(self) -> Caller:
        return Caller(person=self.person, organization=self.organization)

    def client(self) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")
        return client


class OrganizationFactory(factory.Factory[Organization]):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Org {n}")

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Organization:
        return services.organization_create(**kwargs)


class PersonFactory(factory.Factory[Person]):
    """A person and their membership of `organization` (an admin with `admin=True`)."""

    class Meta:
        model = Person

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"person {n}")
    admin = False

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Person:
        return services.person_create(**kwargs)


class ActorFactory(factory.Factory[Actor]):
    """[H2] A member of `organization` with a token bound to them and to it."""

    class Meta:
        model = Actor

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"person {n}")
    admin = False

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Actor:
        organization = kwargs["organization"]
        person = PersonFactory.create(
            organization=organization, name=kwargs["name"], admin=kwargs["admin"]
        )
        token = services.token_create(person=person, organization=organization)
        return Actor(person=person, organization=organization, token=token)


class BotFactory(factory.Factory[Bot]):
    class Meta:
        model = Bot

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"bot {n}")

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Bot:
        return services.bot_create(**kwargs)


class GrantFactory(factory.Factory[Grant]):
    """[H3] `level` on `bot` for one `person`, or for every member of `organization`."""

    class Meta:
        model = Grant

    bot = factory.SubFactory(BotFactory)
    level = "read"
    person = None
    organization = None

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Grant:
        return services.grant_set(**kwargs)


class ChannelFactory(factory.Factory[Channel]):
    """[H5] A channel of `members` (people of `organization`)."""

    class Meta:
        model = Channel

    organization = factory.SubFactory(OrganizationFactory)
    members: Any = factory.List([])

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Channel:
        return services.channel_create(**kwargs)


def readable_bot(owner: Actor) -> Bot:
    """A bot of the owner's organization that all its members may read [H3]."""
    grant = GrantFactory.create(
        bot=BotFactory.create(organization=owner.organization), organization=owner.organization
    )
    return grant.bot


class ChatFactory(factory.Factory[Chat]):
    """[C4] A chat of `owner`'s with `bot` (a group chat in `channel` if given), created as
    `POST /v1/chats` creates it: the owner needs read on the bot and a place in the channel."""

    class Meta:
        model = Chat

    owner = factory.SubFactory(ActorFactory)
    bot = factory.LazyAttribute(lambda chat: readable_bot(chat.owner))
    channel = None
    test = False

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Chat:
        channel = kwargs["channel"]
        return chat_services.chat_create(
            caller=kwargs["owner"].caller,
            bot_id=kwargs["bot"].id,
            channel_id=channel.id if channel else None,
            test=kwargs["test"],
        )


class ItemFactory(factory.Factory[Item]):
    """[C2, C3] `person`'s words in `chat` (the owner's by default), the input of a turn the
    bot leaves unanswered: the turn ends at once, as every turn does [C6]."""

    class Meta:
        model = Item

    chat = factory.SubFactory(ChatFactory)
    person = factory.LazyAttribute(lambda item: item.chat.owner)
    text = "something worth keeping"

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Item:
        chat = kwargs["chat"]
        turn = chat_services.turn_start(chat=chat, person=kwargs["person"], text=kwargs["text"])
        chat_services.turn_end(turn=turn)
        return Item.objects.get(chat=chat, seq=turn.input_seq)


class EntryFactory(factory.Factory[Entry]):
    """[A2] A pinned entry that `author` told `bot` to remember: for the author only."""

    class Meta:
        model = Entry

    author = factory.SubFactory(ActorFactory)
    bot = factory.LazyAttribute(lambda entry: readable_bot(entry.author))
    content = factory.Sequence(lambda n: f"remember this, number {n}")
    topics: Any = factory.List([])

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Entry:
        author = kwargs["author"]
        return entry_remember(
            pool_id=kwargs["bot"].pool_bot_id,
            person_id=author.person.id,
            organization_id=author.organization.id,
            content=kwargs["content"],
            topics=kwargs["topics"],
        )
