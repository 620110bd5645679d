"""[A13] The docs UI at /v1/docs, with its assets served by this server (no network), and a
schema a browser shows."""

import json
import re
from typing import Any

import httpx
from django.core.management import call_command
from django.test import Client

from tests.openbot.test_settings import SETUP, production_env, python

ASSET = re.compile(r'(?:src|href)="([^"]+)"')


def test_the_docs_load_with_bundled_assets(live_server: Any) -> None:
    """(Redoc is not served: its page loads fonts from Google.)"""
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        page = client.get("/v1/docs")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assets = ASSET.findall(page.text)

        assert len(assets) >= 2
        for asset in assets:
            assert asset.startswith("/static/"), asset  # nothing from another host
            assert client.get(asset).status_code == 200, asset
        assert not re.search(r"https?://", page.text.replace(live_server.url, ""))
        assert "/v1/schema" in page.text


def test_the_json_schema_is_shown_in_a_browser_and_lists_every_operation(
    live_server: Any,
) -> None:
    """The docs render the schema they load; it names every operation with a description."""
    response = httpx.get(f"{live_server.url}/v1/schema?format=json", timeout=30)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["content-disposition"].startswith("inline")
    operations = [
        (method, path, operation)
        for path, methods in json.loads(response.content)["paths"].items()
        for method, operation in methods.items()
    ]
    assert len(operations) == 22
    assert all(operation["description"] for _, _, operation in operations)


def test_production_serves_the_docs_assets_after_collectstatic(
    db: Any, settings: Any, tmp_path: Any
) -> None:
    """[A13] With production's middleware and storage, `collectstatic` gathers the docs'
    assets (hashed, compressed names) and WhiteNoise serves them: gunicorn alone serves
    /v1/docs whole, with no proxy, no finders and no test server's static handler."""
    shown = python(
        production_env(),
        "-c",
        f"{SETUP}; import json; from django.conf import settings as s; "
        "print(json.dumps({'MIDDLEWARE': s.MIDDLEWARE, 'STORAGES': s.STORAGES}))",
    )
    assert shown.returncode == 0, shown.stderr
    production = json.loads(shown.stdout)
    settings.MIDDLEWARE = production["MIDDLEWARE"]
    settings.STORAGES = production["STORAGES"]
    settings.STATIC_ROOT = tmp_path / "static"
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    call_command("collectstatic", "--noinput", verbosity=0)
    client = Client()  # a new handler: WhiteNoise reads STATIC_ROOT as it starts

    page = client.get("/v1/docs")
    assert page.status_code == 200
    assets = ASSET.findall(page.content.decode())
    assert len(assets) >= 2
    for asset in assets:
        assert re.search(r"\.[0-9a-f]{12}\.", asset), asset  # the hashed name
        response = client.get(asset, HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200, asset
        if asset.endswith((".js", ".css")):
            assert response.get("Content-Encoding") == "gzip", asset
        assert b"".join(response.streaming_content), asset  # type: ignore[attr-defined]
