"""[Q4] Hot queries built and compiled by the ORM once per process and shape, then run with
values filled in per call.

Building and compiling a query with the ORM costs more than PostgreSQL takes to run it when it
reads a few rows by index. A query whose SQL depends on its values only through parameters is
built once from marked stand-in values (`stand_in`); a call fills the marked parameters with
its own values. The query is the same queryset the ORM builds; only its compilation is kept.
"""

import itertools
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import QuerySet

_MARK = "\x1e"


def stand_in(name: str) -> str:
    """A marked value that a compiled query's parameters carry in place of `name`'s value."""
    return f"{_MARK}{name}{_MARK}"


def is_stand_in(value: str, prefix: str) -> bool:
    """Whether `value` is a stand-in whose name begins with `prefix`."""
    return value.startswith(f"{_MARK}{prefix}")


@dataclass(frozen=True)
class Compiled:
    """One query's SQL and parameters, some of them marked stand-ins, and its column names."""

    sql: str
    params: tuple[Any, ...]
    names: tuple[str, ...]

    def params_for(self, values: dict[str, str]) -> list[Any]:
        """The query's parameters for `values` (stand-in to value), for running it or using
        it as a subquery."""
        return [_filled(param, values) for param in self.params]

    @cached_property
    def native_sql(self) -> str:
        """The SQL with PostgreSQL's own placeholders ($1 …), which psycopg sends as it is
        (`cursor(native=True)`). psycopg parses a query with placeholders of its own again on
        every call once it has more than 50 parameters (or 4,096 bytes), and the full listing
        has more than 50: parsing it again is a noticeable share of a small listing's time."""
        numbers = itertools.count(1)
        native = re.sub(
            r"%%|%s", lambda found: "%" if found[0] == "%%" else f"${next(numbers)}", self.sql
        )
        if next(numbers) != len(self.params) + 1:
            raise ValueError("the compiled SQL holds a placeholder Django does not write")
        return native

    def rows(self, values: dict[str, str], *, binary: bool = False) -> list[dict[str, Any]]:
        """The query's rows for `values` (stand-in to value), as dicts by column name; with
        `binary`, sent by PostgreSQL in its binary format (`cursor`). Logged queries (DEBUG,
        tests that count them) are run with psycopg's placeholders, to be logged with their
        values."""
        native = connection.vendor == "postgresql" and not connection.queries_logged
        with cursor(binary=binary, native=native) as rows_cursor:
            rows_cursor.execute(self.native_sql if native else self.sql, self.params_for(values))
            return [dict(zip(self.names, row, strict=True)) for row in rows_cursor.fetchall()]


def cursor(*, binary: bool = False, native: bool = False) -> Any:
    """A cursor for queries run many times with different values: on PostgreSQL it binds
    the parameters on the server, so that psycopg prepares a query the second time a
    connection runs it (`prepare_threshold`, settings.base) and PostgreSQL stops planning it
    on every call. Django's own cursors bind on the client and are never prepared.

    With `binary`, PostgreSQL sends the rows in its binary format, which psycopg reads
    faster than text, which counts for a long listing. Only for rows of text, numbers,
    booleans and arrays of them: Django's loaders of other types (times, JSON) are for the
    text format. With `native`, the query's placeholders are PostgreSQL's own ($1 …), which
    psycopg does not parse (`Compiled.native_sql`)."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    # As Django's own `connection.cursor()`: a kept connection that died is replaced first.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        server_bound: Any = (psycopg.RawCursor if native else psycopg.Cursor)(connection.connection)
    if binary:
        server_bound.format = psycopg.pq.Format.BINARY
    if connection.queries_logged:
        return _LoggedWithValues(server_bound, connection)
    return connection.make_cursor(server_bound)


class _LoggedWithValues(CursorDebugWrapper):
    """Logs (DEBUG, tests) a server-bound query with its values, as Django's own are logged:
    psycopg keeps no text of a prepared statement's run for Django to log."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(psycopg.ClientCursor(self.cursor.connection).mogrify(sql, params)):
            return CursorWrapper.execute(self, sql, params)


def _filled(param: Any, values: dict[str, str]) -> Any:
    if not isinstance(param, str) or _MARK not in param:
        return param
    for marked, value in values.items():
        param = param.replace(marked, value)
    return param


_cache: dict[Hashable, Compiled] = {}


def compiled(key: Hashable, build: Callable[[], QuerySet[Any]]) -> Compiled:
    """The compiled `values()` query `build` returns, built the first time `key` is asked."""
    key = (connection.vendor, key)
    found = _cache.get(key)
    if found is None:
        query = build().query
        sql, params = query.sql_with_params()
        # The columns' names in their order, as Django's `ValuesIterable` reads them.
        names = tuple(
            query.selected or (*query.extra_select, *query.values_select, *query.annotation_select)
        )
        found = _cache[key] = Compiled(sql, tuple(params), names)
    return found
