"""Settings and the schema: production refuses to start without its secrets [X1, O2], passes
`check --deploy` with them [O2], and the OpenAPI schema lists every /v1 route [A8]."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

BASE_DIR = Path(settings.BASE_DIR)


def production_env(**changes: str | None) -> dict[str, str]:
    """The environment .ci/run uses for `check --deploy`, with `changes` applied (None
    removes a variable). Nothing leaks in from the test process's own settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "OPENBOT_", "SECRET_KEY", "ALLOWED_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="settings.production",
        SECRET_KEY=secrets.token_urlsafe(50),
        OPENBOT_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        OPENBOT_BROKER_URL="redis://127.0.0.1:6379/0",
        ALLOWED_HOSTS="memory.example.com",
    )
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def python(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SETUP = "import django; django.setup()"


def test_production_starts_with_its_environment() -> None:
    """The control for the refusals below: with everything set, django.setup() succeeds."""
    done = python(production_env(), "-c", SETUP)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"SECRET_KEY": None}, "SECRET_KEY"),
        ({"SECRET_KEY": ""}, "SECRET_KEY"),
        ({"OPENBOT_ENCRYPTION_KEYS": None}, "OPENBOT_ENCRYPTION_KEYS"),
        ({"OPENBOT_ENCRYPTION_KEYS": " , "}, "OPENBOT_ENCRYPTION_KEYS"),
        ({"OPENBOT_ENCRYPTION_KEYS": "not-a-fernet-key"}, "OPENBOT_ENCRYPTION_KEYS"),
        ({"DATABASE_URL": None}, "DATABASE_URL"),
        ({"DATABASE_URL": "sqlite:///db.sqlite3"}, "DATABASE_URL"),
        ({"OPENBOT_BROKER_URL": None}, "OPENBOT_BROKER_URL"),
        ({"OPENBOT_BROKER_URL": "http://127.0.0.1:6379"}, "OPENBOT_BROKER_URL"),
        (
            {"OPENBOT_BROKER_URL": "amqp://127.0.0.1:5672/%2F", "OPENBOT_BROKER_NAMESPACE": "x"},
            "OPENBOT_BROKER_NAMESPACE",
        ),
        ({"SECURE_SSL_REDIRECT": "maybe"}, "SECURE_SSL_REDIRECT"),
        ({"DATABASE_CONN_MAX_AGE": "soon"}, "DATABASE_CONN_MAX_AGE"),
        ({"OPENBOT_TRUSTED_PROXY_COUNT": "-1"}, "OPENBOT_TRUSTED_PROXY_COUNT"),
    ],
)
def test_production_refuses_to_start_without_its_secrets(
    changes: dict[str, str | None], named: str
) -> None:
    """[X1] "a production start without a configured key refuses to run"; [O2] no defaults."""
    done = python(production_env(**changes), "-c", SETUP)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr, done.stderr
    assert named in done.stderr.strip().splitlines()[-1], done.stderr
    assert "not-a-fernet-key" not in done.stderr.strip().splitlines()[-1]


def test_production_keeps_database_connections() -> None:
    """[G3] A gunicorn or worker thread reuses its connection, checked before each request,
    rather than opening one per request; DATABASE_CONN_MAX_AGE (seconds) tunes it."""
    show = (
        "import django; django.setup(); from django.conf import settings; "
        "config = settings.DATABASES['default']; "
        "print(config['CONN_MAX_AGE'], config['CONN_HEALTH_CHECKS'])"
    )
    assert python(production_env(), "-c", show).stdout.split() == ["60", "True"]
    closing = python(production_env(DATABASE_CONN_MAX_AGE="0"), "-c", show)
    assert closing.stdout.split() == ["0", "True"], closing.stderr


def test_redis_keys_are_under_the_configured_namespace() -> None:
    """Deployments sharing one Redis database keep apart by OPENBOT_BROKER_NAMESPACE (the
    broker's key prefix, `dramatiq` unless set)."""
    show = "import django; django.setup(); import dramatiq; print(dramatiq.get_broker().namespace)"
    assert python(production_env(), "-c", show).stdout.split() == ["dramatiq"]
    staging = python(production_env(OPENBOT_BROKER_NAMESPACE="staging"), "-c", show)
    assert staging.stdout.split() == ["staging"], staging.stderr


def test_production_passes_check_deploy() -> None:
    """[O2] `manage.py check --deploy --fail-level WARNING` with production settings."""
    done = python(production_env(), "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_development_needs_no_environment(tmp_path: Path) -> None:
    """[O1] The default settings start with no environment variables at all."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "OPENBOT_", "SECRET_KEY"))
    }
    done = python(env, "manage.py", "check", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr


# --- the schema [A8] -----------------------------------------------------------------------


def v1_routes() -> dict[str, set[str]]:
    """Every /v1 route of the URLconf as an OpenAPI path, with the methods its view serves."""
    found: dict[str, set[str]] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("v1/"):
                if route in ("v1/schema", "v1/docs"):  # the schema and its docs
                    continue
                # [A9] ViewSets on routers: regex routes, methods mapped to actions.
                actions = getattr(pattern.callback, "actions", None)
                view = getattr(pattern.callback, "view_class", None)
                if actions is not None:
                    methods = set(actions) - {"head"}  # added per request, as for View
                elif view is not None and issubclass(view, APIView):
                    methods = {
                        m for m in view.http_method_names if m != "options" and hasattr(view, m)
                    }
                else:
                    continue
                route = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route.replace("^", ""))
                path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.rstrip("$"))
                found[path] = methods

    walk(get_resolver().url_patterns, "")
    return found


def test_schema_lists_every_v1_route(db: Any) -> None:
    response = Client().get("/v1/schema?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    routes = v1_routes()
    expected_host_routes = {
        "/v1/organizations/{org_id}/settings": {"get", "patch"},
        "/v1/chats": {"post"},
        "/v1/chats/{chat_id}": {"get"},
        "/v1/chats/{chat_id}/items": {"get", "delete"},
    }
    for path, methods in expected_host_routes.items():
        assert routes.get(path) == methods, (path, routes.get(path))
    for path, methods in routes.items():
        assert path in schema["paths"], path
        assert set(schema["paths"][path]) >= methods, (path, set(schema["paths"][path]))
        for method in methods:
            operation = schema["paths"][path][method]
            documented = set(operation["responses"])
            # [A13] Only the codes an operation can answer, each error in the §8 shape: every
            # route needs a token, and a route about an object answers 404 for an unseen one.
            assert "401" in documented, (path, method, documented)
            if "{" in path:
                assert "404" in documented, (path, method, documented)
            for code in documented - {"200", "201", "204"}:
                error = operation["responses"][code]["content"]["application/json"]["schema"]
                assert error == {"$ref": "#/components/schemas/Error"}, (path, method, code)
            assert operation.get("description"), (path, method)
            assert schema["paths"][path][method].get("security") == [{"bearerAuth": []}]


def test_schema_is_served_without_a_token_as_yaml_too(db: Any) -> None:
    response = Client().get("/v1/schema")
    assert response.status_code == 200
    assert response.content.startswith(b"openapi: 3.")


def test_schema_validates_without_warnings(tmp_path: Path) -> None:
    """[A8] The schema is valid OpenAPI and drf-spectacular has nothing to warn about (such
    as two views' nested `InputSerializer`s colliding into one component)."""
    target = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    assert target.read_text().startswith("openapi: 3.")
