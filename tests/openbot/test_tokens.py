"""[H7] Tokens: listed without secrets, revoked and expired at once (401), last use noted;
a membership ended by command takes the person's tokens there with it."""

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from openbot.models import Token
from tests.conftest import World


def run(command: str, *args: str) -> Any:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return json.loads(out.getvalue())


def memory(world: World, token: str) -> int:
    client = world.alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get(f"/v1/bots/{world.bot.id}/memory").status_code


def test_list_tokens_shows_metadata_never_a_secret(world: World) -> None:
    made = run("create_token", "--person", world.alice.person.id, "--org", world.org.id)
    assert memory(world, made["token"]) == 200
    listed = run("list_tokens", "--person", world.alice.person.id)["tokens"]
    assert [token["id"] for token in listed] == sorted(
        Token.objects.filter(person=world.alice.person).values_list("pk", flat=True)
    )
    [used] = [token for token in listed if token["id"] == made["id"]]
    assert set(used) == {"id", "organization", "createdAt", "lastUsedAt", "expiresAt"}
    assert used["lastUsedAt"] is not None and used["expiresAt"] is None
    text = json.dumps(listed)
    assert made["token"] not in text
    assert not any(
        key_hash in text for key_hash in Token.objects.values_list("key_hash", flat=True)
    )


def test_a_revoked_token_is_401_at_once(world: World) -> None:
    made = run("create_token", "--person", world.alice.person.id, "--org", world.org.id)
    assert memory(world, made["token"]) == 200
    assert run("revoke_token", "--token", str(made["id"])) == {"revoked": made["id"]}
    assert memory(world, made["token"]) == 401
    assert memory(world, world.alice.token) == 200  # her other tokens still work


def test_revoking_an_unknown_token_names_the_option(world: World) -> None:
    with pytest.raises(CommandError, match="^--token:"):
        run("revoke_token", "--token", "999999")


def test_an_expired_token_is_401_at_once(world: World) -> None:
    made = run(
        "create_token",
        "--person",
        world.alice.person.id,
        "--org",
        world.org.id,
        "--expires-in",
        "1",
    )
    assert made["expiresAt"] is not None
    assert memory(world, made["token"]) == 200
    Token.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert memory(world, made["token"]) == 401


@pytest.mark.parametrize("days", ["0", "-3", "40000"])
def test_expiry_must_be_a_sensible_number_of_days(world: World, days: str) -> None:
    args = ["--person", world.alice.person.id, "--org", world.org.id, "--expires-in", days]
    with pytest.raises(CommandError, match="^--expires-in:"):
        run("create_token", *args)


def test_last_use_is_written_at_most_once_a_minute(
    world: World, django_assert_num_queries: Any
) -> None:
    assert memory(world, world.bob.token) == 200
    first = Token.objects.get(person=world.bob.person).last_used_at
    assert first is not None
    assert memory(world, world.bob.token) == 200
    assert Token.objects.get(person=world.bob.person).last_used_at == first


def test_remove_person_ends_the_membership_and_its_tokens(world: World) -> None:
    assert memory(world, world.bob.token) == 200
    assert run("remove_person", "--org", world.org.id, "--person", world.bob.person.id) == {
        "removed": True
    }
    assert memory(world, world.bob.token) == 401
    assert not Token.objects.filter(person=world.bob.person, organization=world.org).exists()
    with pytest.raises(CommandError, match="^--person:"):
        run("remove_person", "--org", world.org.id, "--person", world.bob.person.id)
