"""Real-browser tests: headless Debian Chromium driven by Playwright against a live server.
Browsers are never downloaded; without Chromium at /usr/bin/chromium the tests skip, except
in CI (`CI` set), where they run and fail.

Playwright's sync API keeps an asyncio loop running in this thread while it is started, and
Django refuses database work under a running loop. So a browser lives only as long as its test
(not pytest-playwright's session-wide fixtures, which would leave the loop running for every
test after it), and the test allows that work while it runs."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots and downloads: `tmp/artifacts/<test>/` (or `$OPENBOT_ARTIFACTS/<test>/`).
ARTIFACTS = Path(os.environ.get("OPENBOT_ARTIFACTS") or settings.BASE_DIR / "tmp" / "artifacts")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="no Chromium at /usr/bin/chromium (Debian: apt-get install -y chromium); "
    "browsers are never downloaded",
)


@contextmanager
def chromium(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()
            # Connections opened under the running loop live in a context of their own (asgiref
            # locals): close them here, or the test database could not be dropped at the end.
            connections.close_all()
