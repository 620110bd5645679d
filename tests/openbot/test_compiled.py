"""[Q4] A query compiled once per process answers as the ORM's `values()` does."""

from typing import Any

from django.db.models import CharField, QuerySet, Value

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
