"""[U2] A person's page in a real browser (`tests.browser`): sign in by link, see what was
learned in a turn, search it, see where it was learned, Forget it, download the export, sign
out; another person and an outsider see nothing of it, a forged or expired link is refused.
Every page passes axe-core with no serious or critical violation, loads nothing from outside
the server, and shows times in the browser's time zone. Screenshots (a desktop and a phone) and
the download go to `tmp/artifacts/me/`."""

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import Browser, Page, ViewportSize, expect

from openbot.models import Organization, Person
from people.models import SignInLink
from people.services import sign_in_link_create
from tests.browser import ARTIFACTS, chromium, needs_chromium
from tests.conftest import World
from tests.memorybot.learning_world import flush_broker, memory_bot_on
from tests.memorybot.scenes import OFFLINE_MODEL, chat_open
from tests.memorybot.test_learning_keeps import learned_turn, memory_of

pytestmark = [needs_chromium, pytest.mark.django_db(transaction=True)]

FOLDER = ARTIFACTS / "me"
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 900}


@pytest.fixture
def person_browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    with chromium(monkeypatch) as browser:
        yield browser


class Visit:
    """One person's browser: a context of its own (cookies, time zone) that notes every URL it
    requests, so that none is outside the server."""

    def __init__(self, browser: Browser, server: str, viewport: ViewportSize) -> None:
        self.server = server
        self.context = browser.new_context(
            viewport=viewport, timezone_id="Europe/Berlin", accept_downloads=True
        )
        self.page: Page = self.context.new_page()
        self.requested: list[str] = []
        self.page.on("request", lambda request: self.requested.append(request.url))

    def sign_in(self, person: Person, organization: Organization) -> None:
        self.open(sign_in_link_create(person=person, organization=organization))
        self.page.get_by_role("button", name="Sign in").click()

    def open(self, path: str) -> None:
        self.page.goto(self.server + path)

    def check(self, name: str) -> None:
        """axe-core on the page as it is; a screenshot; every request so far to the server."""
        violations = Axe().run(self.page).response["violations"]
        serious = [
            (violation["id"], [node["target"] for node in violation["nodes"]])
            for violation in violations
            if violation["impact"] in ("serious", "critical")
        ]
        assert serious == [], name
        FOLDER.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(FOLDER / f"{name}.png"), full_page=True)
        outside = [url for url in self.requested if not url.startswith(self.server)]
        assert outside == [], name


def alice_says(world: World, text: str) -> tuple[str, dict[str, str]]:
    """alice's chat with the bot, where she said `text` and the offline memory bot learned from
    it: the chat's id, and the ids of what she sees learned by their content."""
    flush_broker()
    memory_bot_on(world, OFFLINE_MODEL)
    chat = chat_open(world.alice, world.bot)
    learned_turn(world.alice, chat, text)
    return chat, {entry["content"]: entry["id"] for entry in memory_of(world.alice, world.bot)}


def test_a_person_sees_searches_forgets_and_downloads_what_a_bot_learned(
    world: World, live_server: Any, person_browser: Browser
) -> None:
    alice, bot = world.alice, world.bot
    chat, learned = alice_says(world, "I live in Hamburg and I am allergic to peanuts.")
    assert set(learned) == {"I live in Hamburg.", "I am allergic to peanuts."}

    visit = Visit(person_browser, live_server.url, DESKTOP)
    page = visit.page
    visit.sign_in(alice.person, alice.organization)
    expect(page.get_by_role("heading", level=1)).to_have_text("What bots remember about you")
    assert "/sign-in/" not in page.url
    visit.check("1-home")

    page.get_by_role("link", name="helper").click()
    entries = page.locator(".entries > li")
    expect(entries).to_have_count(2)
    hamburg = page.locator(f"#entry-{learned['I live in Hamburg.']}")
    expect(hamburg).to_contain_text("I live in Hamburg.")
    expect(hamburg).to_contain_text("Learned from: your chat")
    # Times in the browser's zone (Berlin), no longer the server's UTC.
    expect(hamburg.locator("time").first).not_to_contain_text("UTC")
    visit.check("2-bot")

    page.get_by_label("Search").fill("Where do I live?")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("heading", level=2).first).to_contain_text("Found for")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("I live in Hamburg.")
    visit.check("3-search")

    # Where it was learned: the chat's learning run, done, two changes kept.
    entries.first.get_by_role("link", name="your chat").click()
    row = page.locator(".runs tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("done")
    expect(row.locator("td").nth(2)).to_have_text("2")
    visit.check("4-learning")
    page.go_back()

    entries.first.get_by_role("link", name="Forget").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget this?")
    visit.check("5-forget-asked")
    page.get_by_role("button", name="Yes, forget it").click()
    expect(page.get_by_role("status")).to_contain_text("Forgotten.")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("I am allergic to peanuts.")
    visit.check("6-forgotten")
    assert [entry["content"] for entry in memory_of(alice, bot)] == ["I am allergic to peanuts."]

    page.get_by_role("link", name="My memory").first.click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download my data").click()
    saved = FOLDER / "export.json"
    download.value.save_as(saved)
    document = json.loads(saved.read_text())
    assert document["person"]["id"] == alice.person.id
    [memory] = document["memory"]
    assert [entry["content"] for entry in memory["entries"]] == ["I am allergic to peanuts."]

    phone = Visit(person_browser, live_server.url, PHONE)
    phone.sign_in(alice.person, alice.organization)
    phone.open(f"/me/bots/{bot.id}/")
    expect(phone.page.locator(".entries > li")).to_have_count(1)
    width = phone.page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "the page scrolls sideways on a phone"
    phone.check("7-phone")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("You are signed out")
    visit.check("8-signed-out")
    visit.open(f"/me/bots/{bot.id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Please sign in")
    expect(page.locator(".entries")).to_have_count(0)


def test_others_see_nothing_of_it_and_bad_links_are_refused(
    world: World, live_server: Any, person_browser: Browser
) -> None:
    chat, learned = alice_says(world, "I am allergic to peanuts.")
    [entry_id] = learned.values()

    bob = Visit(person_browser, live_server.url, DESKTOP)
    bob.sign_in(world.bob.person, world.org)
    bob.open(f"/me/bots/{world.bot.id}/?history=1")
    expect(bob.page.get_by_text("This bot remembers nothing about you")).to_be_visible()
    bob.open(f"/me/bots/{world.bot.id}/entries/{entry_id}/forget")
    expect(bob.page.get_by_role("heading", level=1)).to_have_text("Not found")
    bob.open(f"/me/chats/{chat}/")
    expect(bob.page.get_by_role("heading", level=1)).to_have_text("Not found")
    bob.check("9-other-person")

    dave = Visit(person_browser, live_server.url, DESKTOP)
    dave.sign_in(world.dave.person, world.other_org)
    dave.open(f"/me/bots/{world.bot.id}/")
    expect(dave.page.get_by_role("heading", level=1)).to_have_text("Not found")
    assert "peanuts" not in dave.page.content()
    dave.check("10-outsider")

    link = sign_in_link_create(person=world.alice.person, organization=world.org)
    forged = Visit(person_browser, live_server.url, DESKTOP)
    forged.open(link[:-2] + ("xx" if not link.endswith("xx") else "yy"))
    forged.page.get_by_role("button", name="Sign in").click()
    expect(forged.page.get_by_role("heading", level=1)).to_have_text("This link does not work")
    forged.check("11-link-refused")

    SignInLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = Visit(person_browser, live_server.url, DESKTOP)
    expired.open(link)
    expired.page.get_by_role("button", name="Sign in").click()
    expect(expired.page.get_by_role("heading", level=1)).to_have_text("This link does not work")
    expired.open("/me/")
    expect(expired.page.get_by_role("heading", level=1)).to_have_text("Please sign in")
