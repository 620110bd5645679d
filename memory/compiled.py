"""[Q4] The hot reads' SQL, built and compiled by the ORM once per process and reader shape.

Building and compiling the access rule's query [V4] with the ORM costs more than PostgreSQL
takes to run it for a reader who sees ten entries. The SQL depends on the reader only through
values (ids, tags) and its shape: how many channels, a person or a circle, `for:bot` or not.
So each query is built once per shape from a stand-in reader whose values are marked, and a
call fills the marked parameters with the reader's values. The query is the same queryset
the ORM path builds; only its compilation is kept.
"""

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import QuerySet

if TYPE_CHECKING:
    from memory.access import Reader

_MARK = "\x1e"


def _stand_in(name: str) -> str:
    return f"{_MARK}{name}{_MARK}"


@dataclass(frozen=True)
class Compiled:
    """One query's SQL and parameters, some of them marked stand-ins, and its column names."""

    sql: str
    params: tuple[Any, ...]
    names: tuple[str, ...]

    def rows(self, values: dict[str, str]) -> list[dict[str, Any]]:
        """The query's rows for `values` (stand-in to value), as dicts by column name."""
        params = [_filled(param, values) for param in self.params]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            return [dict(zip(self.names, row, strict=True)) for row in cursor.fetchall()]


def _filled(param: Any, values: dict[str, str]) -> Any:
    if not isinstance(param, str) or _MARK not in param:
        return param
    for stand_in, value in values.items():
        param = param.replace(stand_in, value)
    return param


_cache: dict[Hashable, Compiled] = {}


@dataclass(frozen=True)
class Shape:
    """A reader and pool with stand-in values, the values they stand for, and the cache key."""

    pool_id: str
    reader: "Reader"
    values: dict[str, str]
    key: Hashable


def shape_of(*, pool_id: str, reader: "Reader", tags: Sequence[str] = ()) -> Shape:
    """Stand-ins for the pool, the reader's ids and channels, and `tags`."""
    values = {_stand_in("pool"): pool_id, _stand_in("org"): reader.organization_id}
    channels = sorted(reader.channel_ids)
    # Zero-padded, so stand-ins sort as the channels they stand for (the rule sorts them).
    stand_ins = [_stand_in(f"channel{index:04d}") for index in range(len(channels))]
    values |= dict(zip(stand_ins, channels, strict=True))
    person = circle = None
    if reader.person_id is not None:
        person = _stand_in("person")
        values[person] = reader.person_id
    if reader.circle_id is not None:
        circle = _stand_in("circle")
        values[circle] = reader.circle_id
    tag_stand_ins = [_stand_in(f"tag{index:04d}") for index in range(len(tags))]
    values |= dict(zip(tag_stand_ins, tags, strict=True))
    stand_in_reader = replace(
        reader,
        organization_id=_stand_in("org"),
        person_id=person,
        circle_id=circle,
        channel_ids=frozenset(stand_ins),
        bot=None,
    )
    key = (person is None, circle is None, len(channels), reader.bot_user, len(tags))
    return Shape(_stand_in("pool"), stand_in_reader, values, key)


def compiled(key: Hashable, build: Callable[[], QuerySet[Any]]) -> Compiled:
    """The compiled `values()` query `build` returns, built the first time `key` is asked."""
    key = (connection.vendor, key)
    found = _cache.get(key)
    if found is None:
        query = build().query
        sql, params = query.sql_with_params()
        names = (*query.extra_select, *query.values_select, *query.annotation_select)
        found = _cache[key] = Compiled(sql, tuple(params), names)
    return found


def tag_stand_ins(shape: Shape) -> list[str]:
    """The stand-ins of the tags given to `shape_of`, in their order."""
    return sorted(stand_in for stand_in in shape.values if stand_in.startswith(f"{_MARK}tag"))
