"""[X1, X4, O3] A canary written through the API never appears in plain text at rest.

A person remembers a unique canary string over HTTP (and reads it back, reads the log, sends
bad requests carrying it). Then it must not appear in plain text in any column of any table
(every table the database has, read with `connection.introspection`), nor in any page of the
admin (every changelist, change and history page, as staff), nor in `django_admin_log`, nor in
anything logged during the requests — with `DEBUG=True`, so `django.db.backends` logs every SQL
statement and its parameters: those carry the ciphertext, which is fine; the plain text must
not be there.
"""

import logging
import uuid
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from memory.models import Entry, EntryTerm
from memory.terms import query_terms, term_hash, text_terms
from tests.conftest import CryptoSpy, World

CANARY = f"canary-{uuid.uuid4().hex} the vault code is 4711"
# What must never show: the unique part alone, wherever it is cut or quoted.
MARK = CANARY.split()[0]
PRODUCT_APPS = {"openbot", "chats", "memory", "memorybot"}


def table_texts() -> dict[str, str]:
    """Every value of every column of every table, as text, per table."""
    texts: dict[str, str] = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            values = []
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, memoryview | bytes):
                        value = bytes(value).decode("utf-8", "replace")
                    values.append(str(value))
            texts[table] = "\n".join(values)
    return texts


def admin_url(model: type[Model], view: str, *args: Any) -> str:
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}"
    return reverse(name, args=[quote(arg) for arg in args])


@pytest.fixture
def remembered(world: World, settings: Settings, caplog: pytest.LogCaptureFixture) -> World:
    """The canary goes in through the API, with every logger at DEBUG and SQL logged."""
    settings.DEBUG = True
    for name in ("", "django", "django.db.backends", "django.request", "django.server"):
        caplog.set_level(logging.DEBUG, logger=name)
    client = world.alice.client()
    url = f"/v1/bots/{world.bot.id}/memory"
    created = client.post(
        url, {"command": {"_tag": "Remember", "content": CANARY, "tags": ["vault"]}}, format="json"
    )
    assert created.status_code == 201, created.json()
    other = client.post(
        url, {"command": {"_tag": "Remember", "content": f"second {CANARY}"}}, format="json"
    )
    assert other.status_code == 201
    # Take one back: a retracted entry keeps its (encrypted) content until a purge.
    forgot = client.post(
        url, {"command": {"_tag": "Forget", "id": other.json()["id"]}}, format="json"
    )
    assert forgot.status_code == 200
    # Bad requests carrying the canary: refused, and not echoed into logs.
    bad = [
        {"command": {"_tag": "Remember", "content": CANARY, "tags": [CANARY]}},
        {"command": {"_tag": "Remember", "content": CANARY * 500}},
        {"command": {"_tag": "Forget", "id": CANARY}},
        {"command": {"_tag": CANARY}},
    ]
    for body in bad:
        response = client.post(url, body, format="json")
        assert response.status_code in (400, 409), response.json()
    read = client.get(url)
    assert [entry["content"] for entry in read.json()["entries"]] == [CANARY]
    assert client.get(f"{url}/log").status_code == 200
    # [R1] Searched for, found, and refused when too long: the query reaches no log either.
    found = client.get(f"{url}/search", {"q": CANARY})
    assert [entry["content"] for entry in found.json()["entries"]] == [CANARY]
    assert client.get(f"{url}/search", {"q": CANARY * 30}).status_code == 400
    return world


def test_no_table_holds_the_canary_in_plain_text(remembered: World) -> None:
    texts = table_texts()
    assert "memory_entry" in texts and "memory_change" in texts
    leaks = [table for table, text in texts.items() if MARK in text]
    assert leaks == []
    # The entries are there, encrypted (Fernet tokens start with "gAAAAA").
    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM memory_entry")
        stored = [row[0] for row in cursor.fetchall()]
    assert len(stored) == 2
    assert all(value.startswith("gAAAAA") for value in stored)
    assert Entry.objects.filter(content_length=len(CANARY)).exists()


def test_the_search_index_holds_no_canary_term(remembered: World) -> None:
    """[R2] The index holds keyed hashes of the canary's terms, never a term: not in its table,
    nor in any column of any other table (what a database dump holds)."""
    terms = set(text_terms(CANARY)) | set(query_terms(CANARY))
    # The canary's own part, as the index stems it (a trailing "e" may go).
    [unique] = text_terms(MARK.removeprefix("canary-"))
    assert unique in terms
    index = table_texts()["memory_entryterm"]
    assert EntryTerm.objects.filter(term=term_hash(unique)).count() == 2
    assert [term for term in terms if term in index] == []
    assert [table for table, text in table_texts().items() if unique in text] == []


def test_no_log_line_holds_the_canary(
    remembered: World, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # The requests ran while the fixture was set up.
    records = caplog.get_records("setup") + caplog.get_records("call")
    sql = [record for record in records if record.name == "django.db.backends"]
    # SQL was logged with its parameters (the ciphertext), so the checks below cover them.
    assert any("INSERT INTO" in record.getMessage() for record in sql)
    assert any("memory_entry" in record.getMessage() for record in sql)
    assert any(record.name == "django.request" for record in records)  # the bad requests
    for record in records:
        assert MARK not in record.getMessage(), record.name
        assert MARK not in repr(record.args), record.name
        assert MARK not in str(record.exc_text or ""), record.name
    out, err = capfd.readouterr()
    assert MARK not in out
    assert MARK not in err


def test_no_admin_page_holds_the_canary(
    remembered: World, caplog: pytest.LogCaptureFixture
) -> None:
    staff = User.objects.create_user(username="support", password="pw-support", is_staff=True)
    client = Client()
    client.force_login(staff)
    # The admin log stores str(obj) of what staff acted on: make it hold entries too.
    LogEntry.objects.log_actions(
        user_id=staff.pk,
        queryset=Entry.objects.defer("content"),
        action_flag=CHANGE,
        change_message="looked at",
    )
    pages = [reverse("admin:index"), reverse("admin:app_list", args=["memory"])]
    models = [model for model in admin.site._registry if model._meta.app_label == "memory"]
    assert Entry in models
    for model in admin.site._registry:
        if model._meta.app_label not in PRODUCT_APPS:
            continue  # Django's own User and Group: the staff accounts, no content
        pages.append(admin_url(model, "changelist"))
        for pk in model._default_manager.values_list("pk", flat=True)[:30]:
            pages.append(admin_url(model, "change", pk))
            pages.append(admin_url(model, "history", pk))
    visited = 0
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        assert MARK not in response.content.decode(), page
        visited += 1
    assert visited > 20
    assert LogEntry.objects.count() == 2
    for row in LogEntry.objects.values("object_repr", "change_message"):
        assert MARK not in str(row)
    assert MARK not in table_texts()["django_admin_log"]
    assert MARK not in caplog.text


def test_admin_pages_decrypt_nothing(remembered: World, crypto: CryptoSpy) -> None:
    """[O3] The memory admin shows metadata without decrypting content or payloads."""
    crypto.arm()
    staff = User.objects.create_user(username="support", password="pw-support", is_staff=True)
    client = Client()
    client.force_login(staff)
    for model in [model for model in admin.site._registry if model._meta.app_label == "memory"]:
        assert client.get(admin_url(model, "changelist")).status_code == 200, model
        for pk in model._default_manager.values_list("pk", flat=True)[:30]:
            assert client.get(admin_url(model, "change", pk)).status_code == 200, model
    assert crypto.decrypted == []
