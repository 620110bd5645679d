"""Failed authentication is logged with the client's address, never the token [H2];
`X-Forwarded-For` counts only behind proxies the settings trust."""

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from openbot import services
from openbot.models import Token
from tests.conftest import World

CLIENT = "203.0.113.7"  # REMOTE_ADDR: whoever connected to this server


@pytest.fixture
def auth_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="openbot.auth"):
        yield caplog


def refused(world: World, authorization: str, forwarded: str = "") -> None:
    response = APIClient().get(
        f"/v1/bots/{world.bot.id}/memory",
        HTTP_AUTHORIZATION=authorization,
        REMOTE_ADDR=CLIENT,
        HTTP_X_FORWARDED_FOR=forwarded,
    )
    assert response.status_code == 401, response.content


def said(log: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in log.records if record.name == "openbot.auth"]


def test_each_refused_token_is_logged_with_the_address_and_never_the_token(
    world: World, auth_log: pytest.LogCaptureFixture
) -> None:
    person, organization = world.bob.person, world.org
    revoked = services.token_create(person=person, organization=organization)
    services.token_revoke(token_id=Token.objects.get(key_hash=services.token_hash(revoked)).pk)
    expired = services.token_create(person=person, organization=organization, expires_in_days=1)
    Token.objects.filter(key_hash=services.token_hash(expired)).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    made_up = "obt_made-up-token-value"
    for token in (made_up, revoked, expired):
        refused(world, f"Bearer {token}", forwarded="198.51.100.1")
    refused(world, f"Bearer {made_up} extra")
    unknown = f"authentication failed from {CLIENT}: an unknown, expired or revoked token"
    malformed = f"authentication failed from {CLIENT}: a malformed header"
    assert said(auth_log) == [unknown, unknown, unknown, malformed]
    for token in (made_up, revoked, expired):
        assert token not in auth_log.text
        assert services.token_hash(token) not in auth_log.text


def test_a_request_with_no_token_is_not_a_failed_authentication(
    world: World, auth_log: pytest.LogCaptureFixture
) -> None:
    assert APIClient().get(f"/v1/bots/{world.bot.id}/memory").status_code == 401
    assert said(auth_log) == []


@pytest.mark.parametrize(
    ("trusted", "forwarded", "address"),
    [
        (0, "198.51.100.1", CLIENT),  # nothing trusted: a client can write anything there
        (1, "198.51.100.1", "198.51.100.1"),
        (1, "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # the client's own entry comes first
        (2, "6.6.6.6, 198.51.100.1, 10.0.0.2", "198.51.100.1"),
        (2, "198.51.100.1", CLIENT),  # fewer entries than proxies: not from the proxies
        (1, "", CLIENT),
    ],
)
def test_x_forwarded_for_counts_only_behind_trusted_proxies(
    world: World,
    auth_log: pytest.LogCaptureFixture,
    settings: Settings,
    trusted: int,
    forwarded: str,
    address: str,
) -> None:
    settings.OPENBOT_TRUSTED_PROXY_COUNT = trusted
    refused(world, "Bearer obt_made-up-token-value", forwarded=forwarded)
    unknown = "an unknown, expired or revoked token"
    assert said(auth_log) == [f"authentication failed from {address}: {unknown}"]
