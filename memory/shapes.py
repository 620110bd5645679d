"""[Q4] Reader shapes: the access rule's hot reads, compiled once per process and reader shape
(`openbot.compiled`).

The SQL of the access rule's query depends on the reader only through values (ids, tags)
and its shape: how many channels, a person or a circle, `for:bot` or not. So each query is
built once per shape from a stand-in reader, and a call fills in the reader's values.
"""

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from openbot.compiled import is_stand_in, stand_in

if TYPE_CHECKING:
    from memory.access import Reader


@dataclass(frozen=True)
class Shape:
    """A reader and pool with stand-in values, the values they stand for, and the cache key."""

    pool_id: str
    reader: "Reader"
    values: dict[str, str]
    key: Hashable


def shape_of(*, pool_id: str, reader: "Reader", tags: Sequence[str] = ()) -> Shape:
    """Stand-ins for the pool, the reader's ids and channels, and `tags`."""
    values = {stand_in("pool"): pool_id, stand_in("org"): reader.organization_id}
    channels = sorted(reader.channel_ids)
    # Zero-padded, so stand-ins sort as the channels they stand for (the rule sorts them).
    stand_ins = [stand_in(f"channel{index:04d}") for index in range(len(channels))]
    values |= dict(zip(stand_ins, channels, strict=True))
    person = circle = None
    if reader.person_id is not None:
        person = stand_in("person")
        values[person] = reader.person_id
    if reader.circle_id is not None:
        circle = stand_in("circle")
        values[circle] = reader.circle_id
    tag_stand_ins = [stand_in(f"tag{index:04d}") for index in range(len(tags))]
    values |= dict(zip(tag_stand_ins, tags, strict=True))
    stand_in_reader = replace(
        reader,
        organization_id=stand_in("org"),
        person_id=person,
        circle_id=circle,
        channel_ids=frozenset(stand_ins),
        bot=None,
    )
    key = (person is None, circle is None, len(channels), reader.bot_user, len(tags))
    return Shape(stand_in("pool"), stand_in_reader, values, key)


def tag_stand_ins(shape: Shape) -> list[str]:
    """The stand-ins of the tags given to `shape_of`, in their order."""
    return sorted(marked for marked in shape.values if is_stand_in(marked, "tag"))
