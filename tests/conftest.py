"""The base fixture set names its people (healthchecks' alice, bob, charlie):

- alice: admin of org A, `write` on the bot; owns the chats.
- bob: member of org A with `read` on the bot (through the organization grant).
- carol: member of org A, in the channel with alice; `read` through the organization.
- dave: an outsider, admin of org B, with a bot of his own.
Everything is built with the factories of `tests.factories`, through the real services.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography.fernet import MultiFernet
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from chats.models import Turn
from openbot import fields
from openbot.models import Bot, Channel, Organization
from tests.factories import (
    Actor,
    ActorFactory,
    BotFactory,
    ChannelFactory,
    GrantFactory,
    OrganizationFactory,
)


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


@pytest.fixture
def world(db: Any) -> World:
    org = OrganizationFactory.create(name="Org A")
    other_org = OrganizationFactory.create(name="Org B")
    alice = ActorFactory.create(organization=org, name="alice", admin=True)
    bob = ActorFactory.create(organization=org, name="bob")
    carol = ActorFactory.create(organization=org, name="carol")
    dave = ActorFactory.create(organization=other_org, name="dave", admin=True)
    bot = BotFactory.create(organization=org, name="helper")
    GrantFactory.create(bot=bot, level="read", organization=org)
    GrantFactory.create(bot=bot, level="write", person=alice.person)
    other_bot = BotFactory.create(organization=other_org, name="theirs")
    GrantFactory.create(bot=other_bot, level="write", organization=other_org)
    channel = ChannelFactory.create(organization=org, members=[alice.person, carol.person])
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


@dataclass
class CryptoSpy:
    """The plain text of every encryption (MultiFernet's) and decryption (`decrypt_all`, which
    every decryption goes through) while armed."""

    armed: bool = False
    encrypted: list[str] = field(default_factory=list)
    decrypted: list[str] = field(default_factory=list)

    def arm(self) -> None:
        self.encrypted.clear()
        self.decrypted.clear()
        self.armed = True


@pytest.fixture
def crypto(monkeypatch: pytest.MonkeyPatch) -> CryptoSpy:
    """Records through the real functions: nothing is replaced."""
    spy = CryptoSpy()
    real_encrypt, real_decrypt_all = MultiFernet.encrypt, fields.decrypt_all

    def encrypt(self: MultiFernet, msg: bytes) -> bytes:
        if spy.armed:
            spy.encrypted.append(msg.decode())
        return real_encrypt(self, msg)

    def decrypt_all(tokens: Sequence[str]) -> list[str | None]:
        texts = real_decrypt_all(tokens)
        if spy.armed:
            spy.decrypted.extend(text for text in texts if text is not None)
        return texts

    monkeypatch.setattr(MultiFernet, "encrypt", encrypt)
    monkeypatch.setattr(fields, "decrypt_all", decrypt_all)
    return spy


from tests.fakes.openai_server import fake_openai  # noqa: E402, F401  (a global fixture)
