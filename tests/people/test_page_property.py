"""[U1, V4] The page against the access rule's reference: for random pools (the access
property test's generator, through the real services), each person's page of the bot of their
organization lists exactly the entries the reference lets them see — the history view with
the toggle, the active ones without — and is not found when they may not read the bot."""

from django.db import transaction
from hypothesis import event, given
from hypothesis import strategies as st

from openbot.access import bot_level
from tests.memory.test_access_property import (  # noqa: F401 (`tenancy` is a fixture)
    RefReader,
    Tenancy,
    example_count,
    random_pool,
    random_pools,
    tenancy,
)
from tests.people.signing_in import listed_ids, signed_in


# Each example signs every person of the pool in: a twentieth of the access test's examples.
@random_pools(max(example_count() // 20, 2))
@given(data=st.data())
def test_the_page_lists_exactly_what_the_reference_lets_each_person_see(
    tenancy: Tenancy,  # noqa: F811
    data: st.DataObject,
) -> None:
    with transaction.atomic():
        model = random_pool(tenancy, data)
        for organization, person_id, bot in tenancy.members():
            client = signed_in(tenancy.people[person_id], organization)
            history = client.get(f"/me/bots/{bot.id}/?history=1")
            if not bot_level(bot=bot, person_id=person_id, organization_id=organization.id):
                assert history.status_code == 404, person_id
                event("a person may not read the bot")
                continue
            reader = RefReader(organization=organization.id, person=person_id)
            expected = model.visible(reader, active_only=False)
            listed = listed_ids(history.content)
            assert set(listed) == expected and len(listed) == len(expected), person_id
            active = listed_ids(client.get(f"/me/bots/{bot.id}/").content)
            assert set(active) == model.visible(reader, active_only=True), person_id
            event("a person reads the bot" + (" and sees entries" if expected else ""))
        transaction.set_rollback(True)
