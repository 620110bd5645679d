"""[U1] Signing in to `/me/` with a one-time link: signed, expiring, spent by its first use,
refused once the person is no longer a member; a session cookie that scripts cannot read, CSRF
on every form, and no token in a URL after sign-in."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core import signing
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from openbot import services
from people.models import SignInLink
from people.services import sign_in_link_create
from tests.conftest import World
from tests.people.signing_in import signed_in


def link_of(world: World) -> str:
    return sign_in_link_create(person=world.bob.person, organization=world.org)


def test_a_link_signs_in_once(world: World) -> None:
    link = link_of(world)
    client = Client()
    # Opening the link only shows a button: a link previewer does not spend it.
    page = client.get(link)
    assert page.status_code == 200 and b"Sign in" in page.content
    # A session and a CSRF token the browser held before are not the person's after.
    client.session.save()
    before = client.cookies["sessionid"].value, client.cookies["csrftoken"].value
    response = client.post(link)
    after = client.cookies["sessionid"].value, client.cookies["csrftoken"].value
    assert before[0] != after[0] and before[1] != after[1]
    assert (response.status_code, response["Location"]) == (302, "/me/")
    cookie = response.cookies["sessionid"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    home = client.get("/me/")
    assert home.status_code == 200 and b"bob" in home.content
    assert home["Cache-Control"].startswith("max-age=0")

    again = Client().post(link)
    assert again.status_code == 400 and b"does not work" in again.content


@pytest.mark.parametrize("damage", ["forged", "expired", "no longer a member", "other salt"])
def test_a_link_that_is_not_good_is_refused(world: World, damage: str) -> None:
    link = link_of(world)
    if damage == "forged":
        link = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
    elif damage == "expired":
        SignInLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    elif damage == "no longer a member":
        services.membership_remove(organization=world.org, person=world.bob.person)
    else:
        # A value signed for something else (a cursor) is not a link.
        link = "/me/sign-in/" + signing.dumps("x" * 43, salt="memory.entries.cursor")
    client = Client()
    response = client.post(link)
    assert response.status_code == 400 and b"does not work" in response.content
    assert client.get("/me/").status_code == 401


def test_a_person_removed_from_the_organization_is_signed_out(world: World) -> None:
    client = signed_in(world.bob.person, world.org)
    assert client.get("/me/").status_code == 200
    services.membership_remove(organization=world.org, person=world.bob.person)
    response = client.get("/me/")
    assert response.status_code == 401 and b"Please sign in" in response.content


def test_signing_out_ends_the_session(world: World) -> None:
    client = signed_in(world.bob.person, world.org)
    response = client.post("/me/sign-out")
    assert response.status_code == 200 and b"You are signed out" in response.content
    assert client.get("/me/").status_code == 401


def test_every_form_needs_its_csrf_token(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    link = link_of(world)
    assert client.post(link).status_code == 403
    # With the token the page's form carries, the same link signs in.
    client.get(link)
    token = client.cookies["csrftoken"].value
    assert client.post(link, {"csrfmiddlewaretoken": token}).status_code == 302
    remember = f"/me/bots/{world.bot.id}/remember"
    assert client.post(remember, {"content": "I like tea."}).status_code == 403


def test_the_command_prints_a_link_that_signs_in(world: World) -> None:
    out = StringIO()
    call_command(
        "login_link",
        "--org",
        world.org.id,
        "--person",
        world.bob.person.id,
        "--base",
        "http://memory.example.com/",
        "--minutes",
        "5",
        stdout=out,
    )
    printed = json.loads(out.getvalue())
    assert printed["expiresInMinutes"] == 5
    assert printed["url"].startswith("http://memory.example.com/me/sign-in/")
    path = printed["url"].removeprefix("http://memory.example.com")
    assert Client().post(path).status_code == 302


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--person", "u_nobody"], "--person: no person"),
        (["--minutes", "0"], "--minutes: must be 1 to"),
        (["--minutes", "100000"], "--minutes: must be 1 to"),
    ],
)
def test_the_command_names_the_option_at_fault(
    world: World, options: list[str], message: str
) -> None:
    arguments = {"--org": world.org.id, "--person": world.bob.person.id}
    for flag, value in zip(options[::2], options[1::2], strict=True):
        arguments[flag] = value
    with pytest.raises(CommandError, match=message):
        call_command("login_link", *[part for pair in arguments.items() for part in pair])


def test_the_command_refuses_a_person_of_another_organization(world: World) -> None:
    with pytest.raises(CommandError, match="--person: .* is not a member"):
        call_command("login_link", "--org", world.org.id, "--person", world.dave.person.id)
