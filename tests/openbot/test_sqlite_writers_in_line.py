"""[G1] The embedded setup's threads wait for SQLite's write lock in line
(`openbot.sqlite_backend`): a transaction holds the process's place from its BEGIN until its
commit, rollback or the connection's close, and never keeps it after.

SQLite only."""

import threading

import pytest
from django.db import connection, transaction

from openbot.models import Organization
from openbot.sqlite_backend.base import _writer

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend"),
    pytest.mark.django_db(transaction=True),
]


def line() -> threading.Lock:
    return _writer(str(connection.settings_dict["NAME"]))


def test_a_transaction_holds_the_line_until_it_commits() -> None:
    with transaction.atomic():
        assert line().locked()
        with transaction.atomic():  # a savepoint: no second place in line
            Organization.objects.create(name="in line")
        assert line().locked()
    assert not line().locked()


def test_a_rollback_gives_the_line_back() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        Organization.objects.create(name="rolled back")
        raise RuntimeError
    assert not line().locked()
    assert not Organization.objects.filter(name="rolled back").exists()


def test_another_thread_waits_for_its_turn_and_then_writes() -> None:
    wrote = threading.Event()

    def write() -> None:
        try:
            with transaction.atomic():
                Organization.objects.create(name="second")
            wrote.set()
        finally:
            connection.close()

    with transaction.atomic():
        Organization.objects.create(name="first")
        other = threading.Thread(target=write)
        other.start()
        # It waits in line, not in SQLite: nothing it writes lands before this commit.
        assert not wrote.wait(0.2)
    other.join(timeout=60)
    assert wrote.is_set()
    assert not line().locked()
    assert set(Organization.objects.values_list("name", flat=True)) >= {"first", "second"}
