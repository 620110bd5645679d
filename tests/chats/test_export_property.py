"""[D1, X4] The export against the access rule's reference: for random pools (the access
property test's generator, through the real services), each person's export holds, for the
bot of their organization, exactly the entries the reference lets them see in the history
view when they may read the bot, and no memory of it when they may not."""

import json
from typing import Any

from django.db import transaction
from hypothesis import event, given
from hypothesis import strategies as st

from conversations.export import person_export
from openbot.access import bot_level
from openbot.models import Organization, Person
from tests.memory.test_access_property import (  # noqa: F401 (`tenancy` is a fixture)
    RefReader,
    Tenancy,
    example_count,
    random_pool,
    random_pools,
    tenancy,
)


def exported_memory(person_id: str, organization_id: str) -> dict[str, set[str]]:
    document: dict[str, Any] = json.loads(
        "".join(
            person_export(
                person=Person.objects.get(id=person_id),
                organization=Organization.objects.get(id=organization_id),
            )
        )
    )
    return {
        memory["bot"]["id"]: {entry["id"] for entry in memory["entries"]}
        for memory in document["memory"]
    }


# Each example exports every person of the pool: a twentieth of the access test's examples.
@random_pools(max(example_count() // 20, 2))
@given(data=st.data())
def test_an_export_holds_exactly_what_the_reference_lets_each_person_see(
    tenancy: Tenancy,  # noqa: F811
    data: st.DataObject,
) -> None:
    with transaction.atomic():
        model = random_pool(tenancy, data)
        for organization, person_id, bot in tenancy.members():
            memory = exported_memory(person_id, organization.id)
            if bot_level(bot=bot, person_id=person_id, organization_id=organization.id):
                expected = model.visible(
                    RefReader(organization=organization.id, person=person_id), active_only=False
                )
                assert memory[bot.id] == expected, person_id
                event("a person reads the bot" + (" and sees entries" if expected else ""))
            else:
                assert bot.id not in memory, person_id
                event("a person may not read the bot")
        transaction.set_rollback(True)
