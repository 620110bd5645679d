"""[Q4] A query compiled once per process answers as the ORM's `values()` does."""

from typing import Any

import psycopg
import pytest
from django.db import connection
from django.db.models import CharField, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext

from openbot.compiled import compiled, stand_in
from openbot.models import Organization
from tests.conftest import World


def test_columns_are_named_in_the_order_they_are_selected(world: World) -> None:
    """An annotation between two fields is named where it stands (Django 5.2's
    `query.selected`), not after the fields."""

    def build() -> QuerySet[Any, Any]:
        return (
            Organization.objects.filter(id=stand_in("org"))
            .annotate(mark=Value("m", output_field=CharField()))
            .values("id", "mark", "name")
        )

    query = compiled("test: an annotation between fields", build)
    expected = [{"id": world.org.id, "mark": "m", "name": world.org.name}]
    assert query.rows({stand_in("org"): world.org.id}) == expected


def test_stand_ins_are_filled_per_call(world: World) -> None:
    def build() -> QuerySet[Any, Any]:
        return Organization.objects.filter(id=stand_in("org")).values("id")

    query = compiled("test: stand-ins", build)
    assert query.rows({stand_in("org"): world.org.id}) == [{"id": world.org.id}]
    assert query.rows({stand_in("org"): "o_unknown"}) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_a_compiled_query_is_prepared_the_second_time_a_connection_runs_it(world: World) -> None:
    """PostgreSQL plans a compiled query once per connection, not on every call (a generic
    plan); the query is still counted and logged with its values, as Django's own are."""

    def build() -> QuerySet[Any, Any]:
        return Organization.objects.filter(id=stand_in("org")).values("id", "name")

    query = compiled("test: prepared", build)

    def prepared() -> list[tuple[int, int]]:
        """The generic and the custom plans PostgreSQL ran the prepared query with."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement = %s",
                [query.sql.replace("%s", "$1")],
            )
            return list(cursor.fetchall())

    values, row = {stand_in("org"): world.org.id}, {"id": world.org.id, "name": world.org.name}
    with CaptureQueriesContext(connection) as captured:
        assert query.rows(values) == [row]
    assert (len(captured), prepared()) == (1, [])
    assert f"'{world.org.id}'" in captured[0]["sql"]
    assert query.rows(values) == query.rows(values) == [row]
    # Planned once, for any values: never planned again for the values of a call.
    assert prepared() == [(2, 0)]


@pytest.mark.skipif(
    connection.vendor != "postgresql" or not connection.settings_dict["OPTIONS"].get("options"),
    reason="PostgreSQL with its connection options (none with DATABASE_PREPARE_THRESHOLD=0)",
)
def test_postgresql_does_not_jit_compile_the_queries(world: World) -> None:
    """[Q4] A full listing's access check is estimated far above `jit_above_cost`: with JIT
    on, PostgreSQL compiled the statement on every call, 244 ms instead of 31 for the
    984-entry reader of the benchmark."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's health check")
@pytest.mark.django_db(transaction=True)
def test_a_compiled_query_replaces_a_kept_connection_that_died() -> None:
    """With health checks on (production), a compiled query that is the first of a request on
    a kept connection the server closed opens a new one, as Django's own queries do."""

    def build() -> QuerySet[Any, Any]:
        return Organization.objects.filter(id=stand_in("org")).values("id")

    query = compiled("test: health check", build)
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    settings = connection.settings_dict
    with psycopg.connect(
        dbname=settings["NAME"], host=settings["HOST"], port=settings["PORT"] or None,
        user=settings["USER"], autocommit=True,
    ) as other:  # fmt: skip
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    # What a request's start does on a kept connection with CONN_HEALTH_CHECKS.
    wrapper: Any = connection
    wrapper.health_check_enabled, wrapper.health_check_done = True, False
    try:
        assert query.rows({stand_in("org"): "o_unknown"}) == []
    finally:
        wrapper.health_check_enabled = False


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's binary format")
def test_rows_read_in_binary_are_the_rows_read_as_text(world: World) -> None:
    """[Q4] The listing reads its rows in PostgreSQL's binary format: text, integers, floats,
    booleans, nulls and arrays of text (one and two levels, as tags and sources) load alike."""

    def build() -> QuerySet[Any, Any]:
        return (
            Organization.objects.filter(id=stand_in("org"))
            .annotate(
                number=RawSQL("9007199254740993::bigint", ()),
                share=RawSQL("0.7::float8", ()),
                yes=RawSQL("true", ()),
                none=RawSQL("NULL::bigint", ()),
                tags=RawSQL("ARRAY['for:bot', 'Grüße', '']", ()),
                sources=RawSQL("ARRAY[ARRAY['chat_1', '3', NULL], ARRAY[NULL, NULL, 'mem_1']]", ()),
            )
            .values("id", "name", "number", "share", "yes", "none", "tags", "sources")
        )

    query = compiled("test: binary", build)
    values = {stand_in("org"): world.org.id}
    as_text = query.rows(values)
    assert query.rows(values, binary=True) == as_text
    assert as_text[0]["sources"] == [["chat_1", "3", None], [None, None, "mem_1"]]


def test_rows_are_the_same_with_postgresqls_placeholders_or_psycopgs(world: World) -> None:
    """[Q4] Unlogged, a compiled query runs with PostgreSQL's own placeholders ($1 …), which
    psycopg does not parse; logged (DEBUG, counted queries) with psycopg's, to be logged with
    its values. A literal percent sign stays one."""

    def build() -> QuerySet[Any, Any]:
        return (
            Organization.objects.filter(id=stand_in("org"), name__startswith="Org")
            .annotate(share=RawSQL("'100%%'", ()))
            .values("id", "share")
        )

    query = compiled("test: placeholders", build)
    values = {stand_in("org"): world.org.id}
    assert query.native_sql.count("$") == len(query.params)
    unlogged = query.rows(values)
    with CaptureQueriesContext(connection) as logged:
        assert query.rows(values) == unlogged == [{"id": world.org.id, "share": "100%"}]
    assert world.org.id in logged[0]["sql"]
