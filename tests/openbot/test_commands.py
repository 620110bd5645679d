"""Provisioning commands [O4, O1]: each prints exactly one JSON object on stdout; bad
arguments are a CommandError (a non-zero exit) whose message names the option."""

import json
import os
import subprocess
import sys
import urllib.request
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from chats import services as chat_services
from openbot.access import Caller
from openbot.models import Bot, Channel, ChannelMember, Grant, Membership, Organization, Person
from tests.conftest import World


def run(name: str, *args: str) -> dict[str, Any]:
    """Run a command; its stdout must be exactly one JSON object and nothing else."""
    out, err = StringIO(), StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n"), text
    value = json.loads(text)
    assert isinstance(value, dict), value
    assert err.getvalue() == ""
    return value


def fails(name: str, *args: str) -> str:
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(name, *args, stdout=out, stderr=StringIO())
    assert out.getvalue() == ""  # nothing half-printed
    return str(raised.value)


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


# --- bootstrap [O1, O4] --------------------------------------------------------------------


def test_bootstrap_prints_a_demo_that_works(db: Any) -> None:
    demo = run("bootstrap")
    assert set(demo) == {"organization", "person", "bot", "token"}
    organization = Organization.objects.get(id=demo["organization"])
    # [O1] the offline model is set, so the memory bot runs with no provider configured.
    assert organization.bot_memory is True
    assert organization.bot_memory_model == "offline:extractive"
    assert Bot.objects.get(id=demo["bot"]).model == "offline:extractive"
    assert Membership.objects.get(organization=organization, person_id=demo["person"]).role == (
        "admin"
    )

    client = client_for(demo["token"])
    response = client.get(f"/v1/organizations/{demo['organization']}/settings")
    assert response.status_code == 200
    assert response.json() == {"botMemory": True, "botMemoryModel": "offline:extractive"}
    response = client.post("/v1/chats", {"bot": demo["bot"]}, format="json")
    assert response.status_code == 201, response.content
    assert client.get(f"/v1/chats/{response.json()['id']}/items").status_code == 200


def test_bootstrap_is_idempotent(db: Any) -> None:
    """Run twice: the same organization, person and bot, and a fresh token; the earlier demo
    token is revoked, so `make run` never leaves a trail of valid tokens behind [H7]."""
    first = run("bootstrap")
    second = run("bootstrap")
    for key in ("organization", "person", "bot"):
        assert first[key] == second[key]
    assert first["token"] != second["token"]
    assert Organization.objects.count() == 1
    assert Person.objects.count() == 1
    assert Bot.objects.count() == 1
    assert Grant.objects.count() == 2
    url = f"/v1/organizations/{first['organization']}/settings"
    assert client_for(first["token"]).get(url).status_code == 401
    assert client_for(second["token"]).get(url).status_code == 200


def test_bootstrap_sets_the_demo_model_when_asked(db: Any) -> None:
    """[B8] `make run MODEL=local` points the demo at the local model, memory bot and bot
    alike; plain `make run` points it back at the offline one."""
    demo = run("bootstrap", "--model", "openai:smollm2")
    organization = Organization.objects.get(id=demo["organization"])
    assert organization.bot_memory_model == "openai:smollm2"
    assert Bot.objects.get(id=demo["bot"]).model == "openai:smollm2"
    again = run("bootstrap")  # without --model the models stay
    assert Bot.objects.get(id=again["bot"]).model == "openai:smollm2"
    run("bootstrap", "--model", "offline:extractive")
    organization.refresh_from_db()
    assert organization.bot_memory_model == "offline:extractive"
    assert Bot.objects.get(id=demo["bot"]).model == "offline:extractive"
    with pytest.raises(CommandError, match="--model"):
        run("bootstrap", "--model", "nope:model")
    organization.refresh_from_db()
    assert organization.bot_memory_model == "offline:extractive"


def test_bootstrap_token_authenticates_over_http(live_server: Any) -> None:
    """[O1] The printed token works against a real HTTP server."""
    demo = run("bootstrap")
    request = urllib.request.Request(  # noqa: S310 - a http:// URL of the test server
        f"{live_server.url}/v1/organizations/{demo['organization']}/settings",
        headers={"Authorization": f"Bearer {demo['token']}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == 200
        assert json.loads(response.read()) == {
            "botMemory": True,
            "botMemoryModel": "offline:extractive",
        }


# --- the provisioning chain ----------------------------------------------------------------


def test_provisioning_chain(db: Any) -> None:
    """create_org → create_person → create_token → create_bot → grant → create_channel →
    channel_member → link_bot → set_org_settings, each with its documented output."""
    org = run("create_org", "--name", "Acme")
    assert set(org) == {"id"} and org["id"].startswith("o_")

    admin = run("create_person", "--org", org["id"], "--admin", "--name", "Ada")
    member = run("create_person", "--org", org["id"])
    assert set(admin) == {"id", "token"} and admin["id"].startswith("u_")
    assert Membership.objects.get(person_id=admin["id"]).role == "admin"
    assert Membership.objects.get(person_id=member["id"]).role == "member"

    token = run("create_token", "--person", member["id"], "--org", org["id"])
    assert set(token) == {"token", "id", "expiresAt"} and token["expiresAt"] is None
    assert token["token"] not in (admin["token"], member["token"])

    bot = run("create_bot", "--org", org["id"], "--name", "Helper", "--model", "offline:x")
    assert set(bot) == {"id"} and bot["id"].startswith("bot_")
    assert Bot.objects.get(id=bot["id"]).model == "offline:x"

    assert run("grant", "--bot", bot["id"], "--org", org["id"], "--level", "read") == {"ok": True}
    assert run("grant", "--bot", bot["id"], "--person", admin["id"], "--level", "write") == {
        "ok": True
    }
    assert set(Grant.objects.filter(bot_id=bot["id"]).values_list("level", flat=True)) == {
        "read",
        "write",
    }

    channel = run("create_channel", "--org", org["id"], "--members", f"{admin['id']}, ")
    assert set(channel) == {"id"} and channel["id"].startswith("ch_")
    assert run("channel_member", "--channel", channel["id"], "--add", member["id"]) == {"ok": True}
    assert ChannelMember.objects.filter(channel_id=channel["id"]).count() == 2
    assert run("channel_member", "--channel", channel["id"], "--remove", member["id"]) == {
        "ok": True
    }
    assert ChannelMember.objects.filter(channel_id=channel["id"]).count() == 1

    other = run("create_org", "--name", "Partner")
    linked = run("link_bot", "--bot", bot["id"], "--org", other["id"])
    assert set(linked) == {"id"}
    assert Bot.objects.get(id=linked["id"]).source_id == bot["id"]
    assert run("link_bot", "--bot", bot["id"], "--org", other["id"]) == linked  # idempotent

    assert run("set_org_settings", "--org", org["id"]) == {
        "botMemory": True,
        "botMemoryModel": None,
    }
    assert run(
        "set_org_settings",
        "--org",
        org["id"],
        "--bot-memory",
        "off",
        "--bot-memory-model",
        "openai:m1",
    ) == {"botMemory": False, "botMemoryModel": "openai:m1"}
    assert run("set_org_settings", "--org", org["id"], "--bot-memory-model", "none") == {
        "botMemory": False,
        "botMemoryModel": None,
    }

    # Every printed token authenticates [H2].
    settings_url = f"/v1/organizations/{org['id']}/settings"
    assert client_for(admin["token"]).get(settings_url).status_code == 200
    assert client_for(member["token"]).get(settings_url).status_code == 403
    assert (
        client_for(token["token"])
        .post("/v1/chats", {"bot": bot["id"]}, format="json")
        .json()["bot"]
        == (bot["id"])
    )


def test_commands_build_what_the_services_build(world: World) -> None:
    """A channel made by command is a real channel: its members may open a group chat."""
    channel = run(
        "create_channel",
        "--org",
        world.org.id,
        "--members",
        f"{world.alice.person.id},{world.bob.person.id}",
        "--name",
        "team",
    )
    chat = chat_services.chat_create(
        caller=Caller(person=world.bob.person, organization=world.org),
        bot_id=world.bot.id,
        channel_id=channel["id"],
        test=False,
    )
    assert chat.channel_id == channel["id"]


# --- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        ("create_org", [], "--name"),
        ("create_person", [], "--org"),
        ("create_token", ["--org", "o_x"], "--person"),
        ("create_token", ["--person", "u_x"], "--org"),
        ("create_bot", [], "--org"),
        ("grant", ["--org", "o_x", "--level", "read"], "--bot"),
        ("grant", ["--bot", "bot_x", "--level", "read"], "--person --org"),
        ("grant", ["--bot", "bot_x", "--org", "o_x"], "--level"),
        ("link_bot", ["--bot", "bot_x"], "--org"),
        ("create_channel", [], "--org"),
        ("channel_member", ["--add", "u_x"], "--channel"),
        ("channel_member", ["--channel", "ch_x"], "--add --remove"),
        ("set_org_settings", [], "--org"),
    ],
)
def test_missing_required_options(db: Any, command: str, args: list[str], option: str) -> None:
    message = fails(command, *args)
    assert "required" in message and option in message, message


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        ("grant", ["--bot", "b", "--org", "o", "--level", "admin"], "--level"),
        ("grant", ["--bot", "b", "--org", "o", "--person", "p", "--level", "read"], "--person"),
        ("channel_member", ["--channel", "c", "--add", "p", "--remove", "p"], "--remove"),
        ("set_org_settings", ["--org", "o", "--bot-memory", "yes"], "--bot-memory"),
        ("create_org", ["--name", "x", "--colour", "red"], "--colour"),
    ],
)
def test_bad_option_values(db: Any, command: str, args: list[str], option: str) -> None:
    message = fails(command, *args)
    assert option in message, message


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        ("create_person", ["--org", "o_nope"], "--org"),
        ("create_token", ["--person", "u_nope", "--org", "<org>"], "--person"),
        ("create_token", ["--person", "<alice>", "--org", "o_nope"], "--org"),
        ("create_bot", ["--org", "o_nope"], "--org"),
        ("grant", ["--bot", "bot_nope", "--org", "<org>", "--level", "read"], "--bot"),
        ("grant", ["--bot", "<bot>", "--person", "u_nope", "--level", "read"], "--person"),
        ("grant", ["--bot", "<bot>", "--org", "o_nope", "--level", "read"], "--org"),
        ("link_bot", ["--bot", "bot_nope", "--org", "<other_org>"], "--bot"),
        ("link_bot", ["--bot", "<bot>", "--org", "o_nope"], "--org"),
        ("create_channel", ["--org", "o_nope", "--members", "<alice>"], "--org"),
        ("create_channel", ["--org", "<org>", "--members", "u_nope"], "--members"),
        ("create_channel", ["--org", "<org>", "--members", " , "], "--members"),
        ("channel_member", ["--channel", "ch_nope", "--add", "<alice>"], "--channel"),
        ("channel_member", ["--channel", "<channel>", "--add", "u_nope"], "--add"),
        ("channel_member", ["--channel", "<channel>", "--remove", "u_nope"], "--remove"),
        ("set_org_settings", ["--org", "o_nope"], "--org"),
        (
            "set_channel_learning",
            ["--org", "o_nope", "--channel", "<channel>", "--learning", "off"],
            "--org",
        ),
        (
            "set_channel_learning",
            ["--org", "<org>", "--channel", "ch_nope", "--learning", "off"],
            "--channel",
        ),
        # Another organization's channel is as unknown as one that does not exist.
        (
            "set_channel_learning",
            ["--org", "<other_org>", "--channel", "<channel>", "--learning", "off"],
            "--channel",
        ),
    ],
)
def test_unknown_ids(world: World, command: str, args: list[str], option: str) -> None:
    known = {
        "<org>": world.org.id,
        "<other_org>": world.other_org.id,
        "<alice>": world.alice.person.id,
        "<bot>": world.bot.id,
        "<channel>": world.channel.id,
    }
    message = fails(command, *[known.get(arg, arg) for arg in args])
    assert message.startswith(f"{option}:"), message


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        # [H2] a token is for a member of the organization.
        ("create_token", ["--person", "<dave>", "--org", "<org>"], "--person"),
        # [H3] grants go to the bot's own organization or to its members.
        ("grant", ["--bot", "<bot>", "--org", "<other_org>", "--level", "read"], "--org"),
        ("grant", ["--bot", "<bot>", "--person", "<dave>", "--level", "read"], "--person"),
        # [H4] a bot is not linked into its own organization.
        ("link_bot", ["--bot", "<bot>", "--org", "<org>"], "--org"),
        # [H5] channels hold members of their organization.
        ("create_channel", ["--org", "<org>", "--members", "<dave>"], "--members"),
        ("channel_member", ["--channel", "<channel>", "--add", "<dave>"], "--add"),
        # [A15] a model is "<provider>:<model>" with a known provider; an org has a name.
        ("create_bot", ["--org", "<org>", "--model", "gpt-4"], "--model"),
        ("create_bot", ["--org", "<org>", "--model", "anthropic:claude"], "--model"),
        (
            "set_org_settings",
            ["--org", "<org>", "--bot-memory-model", "junk"],
            "--bot-memory-model",
        ),
        ("create_org", ["--name", ""], "--name"),
        ("create_org", ["--name", "   "], "--name"),
    ],
)
def test_refusals_of_the_services_name_the_option(
    world: World, command: str, args: list[str], option: str
) -> None:
    known = {
        "<org>": world.org.id,
        "<other_org>": world.other_org.id,
        "<dave>": world.dave.person.id,
        "<bot>": world.bot.id,
        "<channel>": world.channel.id,
    }
    message = fails(command, *[known.get(arg, arg) for arg in args])
    assert message.startswith(f"{option}:"), message


def test_failed_commands_write_nothing(world: World) -> None:
    """A refusal half-way (bob is added, then dave is refused) leaves no channel behind."""
    before = (Channel.objects.count(), ChannelMember.objects.count(), Grant.objects.count())
    members = f"{world.bob.person.id},{world.dave.person.id}"
    fails("create_channel", "--org", world.org.id, "--members", members)
    fails("grant", "--bot", world.bot.id, "--person", world.dave.person.id, "--level", "read")
    after = (Channel.objects.count(), ChannelMember.objects.count(), Grant.objects.count())
    assert before == after
    assert not ChannelMember.objects.filter(person=world.bob.person).exists()


def test_command_line_exit_codes(tmp_path: Path) -> None:
    """From a shell: exit 0 and one JSON line on success; non-zero and the option named on
    stderr for a missing option or an unknown id."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "OPENBOT_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="settings.dev",
        DATABASE_URL=f"sqlite:///{tmp_path / 'cli.sqlite3'}",
        OPENBOT_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
    )

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert manage("migrate", "--noinput", "-v0").returncode == 0
    done = manage("create_org", "--name", "Shell")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {"id"} and done.stdout.count("\n") == 1

    missing = manage("create_bot")
    assert missing.returncode != 0 and "--org" in missing.stderr, missing.stderr
    unknown = manage("create_bot", "--org", "o_nope")
    assert unknown.returncode != 0 and "--org: no organization" in unknown.stderr
    assert unknown.stdout == ""
    level = manage("grant", "--bot", "b", "--org", "o", "--level", "owner")
    assert level.returncode != 0 and "--level" in level.stderr


def test_set_channel_learning(world: World) -> None:
    """[D4] The command does what the channel route does, and prints the same body."""
    args = ["--org", world.org.id, "--channel", world.channel.id, "--learning"]
    channel = {"id": world.channel.id, "name": world.channel.name}
    assert run("set_channel_learning", *args, "off") == {**channel, "learning": False}
    world.channel.refresh_from_db()
    assert world.channel.learning is False
    assert run("set_channel_learning", *args, "on") == {**channel, "learning": True}
    assert "--learning" in fails("set_channel_learning", *args, "maybe")
