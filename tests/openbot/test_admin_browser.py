"""[O5, O6] Support staff in a real browser (`tests.browser`): log in, find an entry by a
person's id, open it, ask why another person cannot see it. Screenshots go to
`tmp/artifacts/admin/`."""

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.browser import ARTIFACTS, chromium, needs_chromium
from tests.conftest import World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact
from tests.openbot.test_admin import CANARY, CANARY_MARK

pytestmark = needs_chromium


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    with chromium(monkeypatch) as browser:
        yield browser.new_page(viewport={"width": 1400, "height": 1000})


def shot(page: Page, name: str) -> None:
    folder = ARTIFACTS / "admin"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    assert CANARY_MARK not in page.content(), name


def test_support_finds_an_entry_and_explains_who_may_see_it(
    world: World, live_server: Any, page: Page
) -> None:
    bob, carol = world.bob.person.id, world.carol.person.id
    entry = fact(
        [
            ItemFactory.create(
                chat=ChatFactory.create(owner=world.bob, bot=world.bot),
                person=world.bob.person,
                text=CANARY,
            )
        ],
        content=CANARY,
    )
    User.objects.create_user(username="support", password="pw-support", is_staff=True)

    page.goto(f"{live_server.url}/admin/login/")
    expect(page).to_have_title(re.compile("OpenBot Bot Memory"))
    page.fill("#id_username", "support")
    page.fill("#id_password", "pw-support")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_contain_text("OpenBot Bot Memory")
    expect(page.get_by_text("View site")).to_have_count(0)
    shot(page, "1-index")

    # Search the entries by the person's id.
    page.goto(f"{live_server.url}/admin/memory/entry/")
    page.fill("#searchbar", bob)
    page.press("#searchbar", "Enter")
    results = page.locator("#result_list tbody tr")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text(entry.id)
    expect(results.first).to_contain_text(" UTC")
    expect(page.locator('input[name="person"]')).to_be_visible()
    shot(page, "2-entries-searched-by-person")

    # Open it: tags, sources, evidence and exclusions, no content.
    page.click(f"#result_list a:text-is('{entry.id}')")
    expect(page.locator("h2", has_text="tags")).to_be_visible()
    for text in (f"from:{bob}", f"for:person:{bob}", f"org:{world.org.id}", f"person:{bob}"):
        expect(page.locator("#content-main")).to_contain_text(text)
    expect(page.locator("h2", has_text="evidence")).to_be_visible()
    expect(page.locator("h2", has_text="exclusions")).to_be_visible()
    shot(page, "3-entry")

    # Why can't carol see it? The first failing clause, on the entry itself.
    page.click("text=explain access for a person or a channel")
    page.select_option("#id_bot", world.bot.id)
    page.fill("#id_person", carol)
    page.click("input[value=Explain]")
    expect(page.locator("#verdict")).to_contain_text(f"Not visible: person {carol}")
    expect(page.locator("#dependencies tr.failing")).to_contain_text("not_admitted")
    shot(page, "4-explain-not-visible")

    page.fill("#id_person", bob)
    page.click("input[value=Explain]")
    expect(page.locator("#verdict")).to_contain_text(f"Visible: person {bob}")
    expect(page.locator("#dependencies tr.failing")).to_have_count(0)
    shot(page, "5-explain-visible")
