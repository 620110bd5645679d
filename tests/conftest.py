"""The base fixture set names its people (healthchecks' alice, bob, charlie):

- alice: admin of org A, `write` on the bot; owns the chats.
- bob: member of org A with `read` on the bot (through the organization grant).
- carol: member of org A, in the channel with alice; `read` through the organization.
- dave: an outsider, admin of org B, with a bot of his own.
Everything is built through the real services.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from chats.models import Turn
from openbot import services
from openbot.access import Caller
from openbot.models import Bot, Channel, Organization, Person


@dataclass
class Actor:
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


@dataclass
class World:
    org: Organization
    other_org: Organization
    bot: Bot
    other_bot: Bot
    channel: Channel
    alice: Actor
    bob: Actor
    carol: Actor
    dave: Actor

    def actor(self, name: str) -> Actor:
        value: Any = getattr(self, name)
        return value


def make_actor(organization: Organization, name: str, admin: bool = False) -> Actor:
    person = services.person_create(organization=organization, name=name, admin=admin)
    token = services.token_create(person=person, organization=organization)
    return Actor(person=person, organization=organization, token=token)


@pytest.fixture
def world(db: Any) -> World:
    org = services.organization_create(name="Org A")
    other_org = services.organization_create(name="Org B")
    alice = make_actor(org, "alice", admin=True)
    bob = make_actor(org, "bob")
    carol = make_actor(org, "carol")
    dave = make_actor(other_org, "dave", admin=True)
    bot = services.bot_create(organization=org, name="helper")
    services.grant_set(bot=bot, level="read", organization=org)
    services.grant_set(bot=bot, level="write", person=alice.person)
    other_bot = services.bot_create(organization=other_org, name="theirs")
    services.grant_set(bot=other_bot, level="write", organization=other_org)
    channel = services.channel_create(organization=org, members=[alice.person, carol.person])
    return World(
        org=org,
        other_org=other_org,
        bot=bot,
        other_bot=other_bot,
        channel=channel,
        alice=alice,
        bob=bob,
        carol=carol,
        dave=dave,
    )


@pytest.fixture(autouse=True)
def every_turn_ends(request: pytest.FixtureRequest) -> Iterator[None]:
    """[C6] After every test that uses the database: no started turn is left without an end.

    It asks for `db` first, so the check runs before the test's database is rolled back or
    flushed."""
    uses_db = request.node.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db"} & set(request.fixturenames)
    )
    if not uses_db:
        yield
        return
    request.getfixturevalue("db")
    yield
    unended = list(Turn.objects.filter(ended_at__isnull=True).values_list("id", flat=True))
    assert unended == [], f"turns started and never ended: {unended}"


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def staff(db: Any) -> Client:
    """A support account: staff with no model permissions at all (the read-only admin needs
    none), logged in to the admin."""
    user = User.objects.create_user(username="support", password="pw-support", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


def error_fields(response: Any) -> dict[str, Any]:
    """The fields a 400 names."""
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"].get("fields") or {})


from tests.fakes.openai_server import fake_openai  # noqa: E402, F401  (a global fixture)
from tests.memory.test_decryptions import crypto  # noqa: E402, F401  (a global fixture)
