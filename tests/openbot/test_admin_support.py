"""[O5] The admin is useful for support: every page searches by the ids that link its rows,
filters narrow, related rows link to each other, times are readable, plurals are right — and
no page decrypts or even loads an encrypted column, or runs a query per row [O3, X4]."""

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chats import services as chat_services
from chats.models import Chat, Event, Item, Turn
from memory.access import Reader
from memory.forgetting import entry_forget
from memory.models import (
    Change,
    ChangeEntry,
    Closure,
    Entry,
    EntrySource,
    EntryTag,
    Evidence,
    Exclusion,
    Pool,
)
from memory.services import ImportedEntry, entries_import, entry_remember
from memorybot.confide import confide_hear
from memorybot.learning import learning_run_process
from memorybot.models import (
    Confession,
    Enrichment,
    EnrichmentEntry,
    LearningRun,
    ModelCall,
    ModelCallEntry,
)
from openbot import services
from openbot.fields import EncryptedTextField
from openbot.models import (
    Bot,
    Channel,
    ChannelMember,
    Grant,
    Membership,
    Organization,
    Person,
    Token,
)
from tests.conftest import CryptoSpy, World
from tests.factories import ChatFactory, ItemFactory
from tests.memory.builders import fact, observation
from tests.openbot.test_admin import CANARY, CANARY_MARK, registered_models, url


@dataclass
class Support:
    world: World
    linked: Bot
    private_chat: Chat
    group_chat: Chat
    turn: Turn
    private: Entry
    group: Entry
    conclusion: Entry
    pinned: Entry
    failed_run: LearningRun


def build(world: World) -> Support:
    """A small but complete world, built through the services, every model with rows."""
    linked = services.bot_link(bot=world.bot, organization=world.other_org)
    services.grant_set(bot=linked, level="read", organization=world.other_org)
    private_chat = ChatFactory.create(owner=world.bob, bot=world.bot)
    private = fact(
        [ItemFactory.create(chat=private_chat, person=world.bob.person, text=CANARY)],
        content=CANARY,
    )
    group_chat = ChatFactory.create(owner=world.alice, bot=world.bot, channel=world.channel)
    group = fact(
        [ItemFactory.create(chat=group_chat, person=world.carol.person, text=CANARY)],
        content=CANARY,
    )
    conclusion = observation([group], audience=f"for:channel:{world.channel.id}", content=CANARY)
    pinned = entry_remember(
        pool_id=world.bot.id,
        person_id=world.alice.person.id,
        organization_id=world.org.id,
        content=CANARY,
        topics=["kept"],
    )
    alice = Reader.person(
        bot=world.bot, person_id=world.alice.person.id, organization_id=world.org.id
    )
    entry_forget(pool_id=world.bot.id, reader=alice, entry_id=group.id)
    # A learning run that fails on a model name no provider knows: stored as it was before
    # names were checked where they are set [A15], so the run itself must show the cause.
    Organization.objects.filter(id=world.org.id).update(bot_memory_model="nope:gpt")
    turn = chat_services.turn_start(chat=private_chat, person=world.bob.person, text=CANARY)
    chat_services.tool_result_append(
        chat=private_chat, app="calendar", tool="lookup", text=CANARY, turn=turn
    )
    confide_hear(turn=Turn.objects.select_related("chat").get(pk=turn.pk), text=CANARY)
    chat_services.turn_end(turn=turn)
    failed_run = LearningRun.objects.get(turn=turn)
    learning_run_process(run_id=failed_run.id)
    failed_run.refresh_from_db()
    enrichment = Enrichment.objects.create(
        chat=private_chat, turn=turn, text=CANARY, original=CANARY, entry_ids=[private.id]
    )
    # [P4] What an enrichment and a model call carried, as the memory bot records it.
    EnrichmentEntry.objects.create(enrichment=enrichment, entry_id=private.id)
    call = ModelCall.objects.filter(step_key__startswith=f"learning:{failed_run.pk}:").get()
    ModelCallEntry.objects.get_or_create(call=call, entry_id=private.id)
    ModelCall.objects.filter(pk=call.pk).update(chat_id=private_chat.id)
    return Support(
        world,
        linked,
        private_chat,
        group_chat,
        turn,
        private,
        group,
        conclusion,
        pinned,
        failed_run,
    )


@pytest.fixture
def support(world: World) -> Support:
    return build(world)


def page(staff: Client, model: type[Model], **params: Any) -> Any:
    response = staff.get(url(model, "changelist"), params)
    assert response.status_code == 200, (model, params)
    assert "e" not in response.wsgi_request.GET, (model, params)  # no silently dropped lookup
    return response


def listed(staff: Client, model: type[Model], **params: Any) -> set[Any]:
    """The primary keys a list page shows."""
    response = page(staff, model, **params)
    assert ".?e=1" not in response.get("Location", "")
    return {row.pk for row in response.context["cl"].result_list}


# --- Search by each id finds the row ------------------------------------------------------


def searches(s: Support) -> list[tuple[type[Model], str, Any]]:
    """(model, a search term, a row it must find) for the ids that link each model's rows."""
    w = s.world
    membership = Membership.objects.get(organization=w.org, person=w.carol.person)
    token = Token.objects.filter(person=w.bob.person).first()
    grant = Grant.objects.get(bot=w.bot, person=w.alice.person)
    member = ChannelMember.objects.get(channel=w.channel, person=w.carol.person)
    item = Item.objects.filter(chat=s.private_chat).first()
    event = Event.objects.get(turn=s.turn)
    tag = EntryTag.objects.get(entry=s.private, tag=f"from:{w.bob.person.id}")
    source = EntrySource.objects.get(entry=s.conclusion)
    evidence = Evidence.objects.get(entry=s.group)
    closure = Closure.objects.get(entry=s.conclusion, ancestor_id=s.group.id)
    exclusion = Exclusion.objects.get(entry=s.group)
    touched = ChangeEntry.objects.filter(entry_id=s.private.id).first()
    assert token and item and touched
    change = touched.change
    call = ModelCall.objects.filter(step_key__startswith=f"learning:{s.failed_run.pk}:").first()
    assert call is not None
    confession = Confession.objects.get(turn=s.turn)
    enrichment = Enrichment.objects.get(turn=s.turn)
    used = EnrichmentEntry.objects.filter(enrichment=enrichment).first()
    carried = ModelCallEntry.objects.first()
    assert used and carried
    return [
        (Organization, w.org.id, w.org.pk),
        (Person, w.carol.person.id, w.carol.person.pk),
        (Membership, w.carol.person.id, membership.pk),
        (Membership, w.org.id, membership.pk),
        (Token, w.bob.person.id, token.pk),
        (Token, w.org.id, token.pk),
        (Bot, w.bot.id, w.bot.pk),
        (Bot, w.bot.id, s.linked.pk),  # a linked bot, by its source
        (Bot, w.other_org.id, s.linked.pk),
        (Grant, w.bot.id, grant.pk),
        (Grant, w.alice.person.id, grant.pk),
        (Channel, w.channel.id, w.channel.pk),
        (Channel, w.org.id, w.channel.pk),
        (ChannelMember, w.channel.id, member.pk),
        (ChannelMember, w.carol.person.id, member.pk),
        (Chat, s.private_chat.id, s.private_chat.pk),
        (Chat, w.bob.person.id, s.private_chat.pk),
        (Chat, w.channel.id, s.group_chat.pk),
        (Chat, w.bot.id, s.group_chat.pk),
        (Chat, w.org.id, s.group_chat.pk),
        (Item, s.private_chat.id, item.pk),
        (Item, str(s.turn.pk), Item.objects.filter(turn=s.turn).first().pk),  # type: ignore[union-attr]
        (Turn, s.private_chat.id, s.turn.pk),
        (Turn, w.bob.person.id, s.turn.pk),
        (Turn, str(s.turn.pk), s.turn.pk),
        (Event, s.private_chat.id, event.pk),
        (Pool, w.bot.id, w.bot.pk),
        (Entry, s.private.id, s.private.pk),
        (Entry, w.bob.person.id, s.private.pk),  # from:/for:person:
        (Entry, w.alice.person.id, s.group.pk),  # her exclusion
        (Entry, w.carol.person.id, s.group.pk),  # evidence? no: from:carol
        (Entry, s.private_chat.id, s.private.pk),
        (Entry, w.channel.id, s.conclusion.pk),
        (Entry, w.org.id, s.pinned.pk),
        (Entry, w.bot.id, s.pinned.pk),
        (Entry, s.linked.id, s.pinned.pk),  # a linked bot reads its source's pool
        (EntryTag, s.private.id, tag.pk),
        (EntryTag, w.bob.person.id, tag.pk),
        (EntrySource, s.conclusion.id, source.pk),
        (EntrySource, s.group.id, source.pk),  # entries drawn from it
        (Evidence, s.group.id, evidence.pk),
        (Evidence, w.channel.id, evidence.pk),
        (Evidence, s.group_chat.id, evidence.pk),
        (Closure, s.conclusion.id, closure.pk),
        (Closure, s.group.id, closure.pk),
        (Exclusion, s.group.id, exclusion.pk),
        (Exclusion, w.alice.person.id, exclusion.pk),
        (Change, w.bot.id, change.pk),
        (Change, s.private.id, change.pk),
        (ChangeEntry, s.private.id, touched.pk),
        (ModelCall, w.bot.id, call.pk),
        (ModelCall, w.org.id, call.pk),
        (ModelCall, str(call.pk), call.pk),
        (Confession, s.private_chat.id, confession.pk),
        (Enrichment, s.private_chat.id, enrichment.pk),
        (EnrichmentEntry, used.entry_id, used.pk),
        (EnrichmentEntry, str(enrichment.pk), used.pk),
        (ModelCallEntry, carried.entry_id, carried.pk),
        (ModelCallEntry, str(carried.call_id), carried.pk),
        (ModelCall, s.private_chat.id, call.pk),  # [P4] a call names its chat
        (LearningRun, s.private_chat.id, s.failed_run.pk),
        (LearningRun, w.bot.id, s.failed_run.pk),
        (LearningRun, w.bob.person.id, s.failed_run.pk),
        (LearningRun, str(s.turn.pk), s.failed_run.pk),
    ]


def test_search_by_each_id_finds_the_row(support: Support, staff: Client) -> None:
    searched = set()
    for model, term, pk in searches(support):
        found = listed(staff, model, q=term)
        assert pk in found, (model.__name__, term)
        searched.add(model)
    # Every product model with rows defines a search.
    assert searched == set(registered_models())


def test_every_page_has_a_search_box(support: Support, staff: Client) -> None:
    for model in registered_models():
        assert 'id="searchbar"' in page(staff, model).content.decode(), model


def test_a_search_that_matches_nothing_finds_nothing(support: Support, staff: Client) -> None:
    for model in registered_models():
        assert listed(staff, model, q="u_nobody") == set(), model


# --- Filters narrow --------------------------------------------------------------------


def filters(s: Support) -> list[tuple[type[Model], dict[str, str], set[Any]]]:
    """(model, filter parameters, exactly the rows they leave)."""
    w = s.world
    return [
        (Entry, {"person": w.bob.person.id}, {s.private.pk}),
        (Entry, {"chat": s.group_chat.id}, {s.group.pk, s.conclusion.pk}),  # [W7] carried
        (Entry, {"channel": w.channel.id}, {s.group.pk, s.conclusion.pk}),
        (
            Entry,
            {"organization": w.org.id},
            {s.private.pk, s.group.pk, s.conclusion.pk, s.pinned.pk},
        ),
        (Entry, {"organization": w.other_org.id}, set()),
        (Entry, {"bot": s.linked.id, "layer": "pinned"}, {s.pinned.pk}),
        (Entry, {"bot": w.other_bot.id}, set()),
        (Entry, {"layer": "observation"}, {s.conclusion.pk}),
        (Entry, {"person": w.carol.person.id, "layer": "fact"}, {s.group.pk}),
        (Chat, {"person": w.bob.person.id}, {s.private_chat.pk}),
        (Chat, {"channel": w.channel.id}, {s.group_chat.pk}),
        (Chat, {"bot": w.bot.id, "channel__isempty": "1"}, {s.private_chat.pk}),
        (
            Turn,
            {"chat": s.group_chat.id},
            set(Turn.objects.filter(chat=s.group_chat).values_list("pk", flat=True)),
        ),
        (
            Item,
            {"chat": s.private_chat.id, "kind": "tool_result"},
            set(
                Item.objects.filter(chat=s.private_chat, kind="tool_result").values_list(
                    "pk", flat=True
                )
            ),
        ),
        (Bot, {"organization": w.other_org.id}, {s.linked.pk, w.other_bot.pk}),
        (Bot, {"source__isempty": "0"}, {s.linked.pk}),
        (Person, {"organization": w.other_org.id}, {w.dave.person.pk}),
        (
            Membership,
            {"organization": w.other_org.id, "role": "admin"},
            {Membership.objects.get(person=w.dave.person).pk},
        ),
        (
            ChannelMember,
            {"channel": w.channel.id},
            set(ChannelMember.objects.filter(channel=w.channel).values_list("pk", flat=True)),
        ),
        (
            Grant,
            {"bot": s.linked.id},
            set(Grant.objects.filter(bot=s.linked).values_list("pk", flat=True)),
        ),
        (
            EntryTag,
            {"entry": s.private.id, "kind": "for"},
            set(EntryTag.objects.filter(entry=s.private, kind="for").values_list("pk", flat=True)),
        ),
        (
            Evidence,
            {"organization": w.org.id, "chat": s.private_chat.id},
            set(Evidence.objects.filter(entry=s.private).values_list("pk", flat=True)),
        ),
        (
            Exclusion,
            {"person": w.alice.person.id},
            set(Exclusion.objects.values_list("pk", flat=True)),
        ),
        (
            Closure,
            {"ancestor": s.group.id},
            set(Closure.objects.filter(ancestor_id=s.group.id).values_list("pk", flat=True)),
        ),
        (
            Change,
            {"entry": s.group.id},
            set(
                ChangeEntry.objects.filter(entry_id=s.group.id).values_list("change_id", flat=True)
            ),
        ),
        (
            ChangeEntry,
            {"entry": s.group.id},
            set(ChangeEntry.objects.filter(entry_id=s.group.id).values_list("pk", flat=True)),
        ),
        (
            ModelCall,
            {"run": str(s.failed_run.pk)},
            set(
                ModelCall.objects.filter(
                    step_key__startswith=f"learning:{s.failed_run.pk}:"
                ).values_list("pk", flat=True)
            ),
        ),
        (
            ModelCall,
            {"chat": s.private_chat.id, "error_kind": "bad_model"},
            # [P4] Every call names its chat: the confide and the learning step.
            set(
                ModelCall.objects.filter(
                    chat_id=s.private_chat.id, error_kind="bad_model"
                ).values_list("pk", flat=True)
            ),
        ),
        (ModelCall, {"chat": s.group_chat.id}, set()),
        (
            ModelCall,
            {"purpose": "confide", "status": "error"},
            set(ModelCall.objects.filter(purpose="confide").values_list("pk", flat=True)),
        ),
        (LearningRun, {"status": "failed", "bot": w.bot.id}, {s.failed_run.pk}),
        (LearningRun, {"organization": w.other_org.id}, set()),
        (Confession, {"chat": s.group_chat.id}, set()),
        (
            Enrichment,
            {"turn": str(s.turn.pk)},
            set(Enrichment.objects.values_list("pk", flat=True)),
        ),
    ]


def test_filters_narrow_to_exactly_the_linked_rows(support: Support, staff: Client) -> None:
    for model, params, expected in filters(support):
        assert listed(staff, model, **params) == expected, (model.__name__, params)


def test_id_filters_are_boxes_that_keep_the_other_filters(support: Support, staff: Client) -> None:
    text = page(staff, Entry, layer="fact", person=support.world.bob.person.id).content.decode()
    # The person box holds the id and carries the layer filter along when resubmitted.
    assert f'name="person" value="{support.world.bob.person.id}"' in text
    assert re.search(r'<input type="hidden" name="layer" value="fact">', text)
    for name in ("bot", "organization", "person", "chat", "channel"):
        assert f'name="{name}"' in text, name


# --- Pages: links, readable times, plurals, product name ---------------------------------


def test_an_entry_page_lists_tags_sources_evidence_and_exclusions(
    support: Support, staff: Client
) -> None:
    s = support
    text = staff.get(url(Entry, "change", s.group.pk)).content.decode()
    for tag in EntryTag.objects.filter(entry=s.group).values_list("tag", flat=True):
        assert tag in text, tag
    assert f"channel:{s.world.channel.id}" in text  # the evidence rule
    assert url(Chat, "change", s.group_chat.id) in text  # the source item's chat, linked
    assert url(Person, "change", s.world.alice.person.id) in text  # alice's exclusion
    assert reverse("admin:memory_entry_explain", args=[quote(s.group.id)]) in text
    assert "?entry=" + s.group.id in text  # its change log rows
    conclusion = staff.get(url(Entry, "change", s.conclusion.pk)).content.decode()
    assert url(Entry, "change", s.group.id) in conclusion  # its source entry, linked
    assert CANARY_MARK not in text + conclusion


def test_times_are_utc_date_times(support: Support, staff: Client) -> None:
    entry = support.private
    text = staff.get(url(Entry, "change", entry.pk)).content.decode()
    assert str(entry.created_at) not in text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", text)
    listing = page(staff, Entry).content.decode() + page(staff, Change).content.decode()
    assert str(entry.updated_at) not in listing
    assert " UTC" in listing


def test_rows_link_to_the_rows_they_name(support: Support, staff: Client) -> None:
    s = support
    tags = page(staff, EntryTag, entry=s.private.id).content.decode()
    assert url(Entry, "change", s.private.id) in tags
    chat = staff.get(url(Chat, "change", s.private_chat.pk)).content.decode()
    for model in (Turn, Item, LearningRun, ModelCall, Confession, Enrichment, Entry):
        assert f"{url(model, 'changelist')}?" in chat, model
    run = staff.get(url(LearningRun, "change", s.failed_run.pk)).content.decode()
    assert url(Chat, "change", s.private_chat.id) in run
    assert url(Turn, "change", s.turn.pk) in run
    assert url(Bot, "change", s.world.bot.id) in run
    assert f"{url(ModelCall, 'changelist')}?run={s.failed_run.pk}" in run
    calls = page(staff, ModelCall, run=str(s.failed_run.pk)).content.decode()
    assert url(LearningRun, "change", s.failed_run.pk) in calls
    assert url(Bot, "change", s.world.bot.id) in calls
    enrichments = page(staff, Enrichment).content.decode()
    assert url(Entry, "change", s.private.id) in enrichments


def test_a_failed_learning_run_shows_its_cause_code(support: Support, staff: Client) -> None:
    """[A12, A15] The run's safe message, and the cause code of its model call."""
    run = support.failed_run
    assert run.status == LearningRun.Status.FAILED
    listing = page(staff, LearningRun).content.decode()
    assert "bad_model" in listing
    assert run.error in listing
    assert "bad_model" in staff.get(url(LearningRun, "change", run.pk)).content.decode()
    assert "bad_model" in page(staff, ModelCall).content.decode()


def test_names_plurals_and_no_view_site_link(support: Support, staff: Client) -> None:
    index = staff.get(reverse("admin:index")).content.decode()
    assert "OpenBot Bot Memory" in index
    assert "View site" not in index
    for wrong in ("Entrys", "Change entrys", "Evidences", "Persons"):
        assert wrong not in index, wrong
    for right in ("Entries", "Change entries", "Evidence", "People"):
        assert f">{right}<" in index, right


# --- Cost: bounded queries, no encrypted column, no decryption ------------------------------


def pages_of_every_model() -> list[tuple[type[Model], str]]:
    """Each registered model's list page and the page of one of its rows."""
    targets = []
    for model in registered_models():
        targets.append((model, url(model, "changelist")))
        obj = model._default_manager.order_by("pk").first()
        if obj is not None:
            targets.append((model, url(model, "change", obj.pk)))
    return targets


def encrypted_columns() -> list[str]:
    return [
        f'"{model._meta.db_table}"."{field.column}"'
        for model in registered_models()
        for field in model._meta.concrete_fields
        if isinstance(field, EncryptedTextField)
    ]


def test_no_page_loads_an_encrypted_column_or_decrypts(
    support: Support, staff: Client, crypto: CryptoSpy
) -> None:
    columns = encrypted_columns()
    assert '"memory_entry"."content"' in columns
    targets = pages_of_every_model()
    targets += [
        (Entry, url(Entry, "changelist") + f"?q={support.world.bob.person.id}"),
        (
            Entry,
            reverse("admin:memory_entry_explain", args=[quote(support.group.id)])
            + f"?bot={support.world.bot.id}&person={support.world.carol.person.id}",
        ),
    ]
    crypto.arm()
    for _, target in targets:
        with CaptureQueriesContext(connection) as queries:
            response = staff.get(target)
        assert response.status_code == 200, target
        sql = "\n".join(query["sql"] for query in queries.captured_queries)
        for column in columns:
            assert column not in sql, (target, column)
        assert CANARY_MARK not in response.content.decode(), target
    assert crypto.decrypted == [], "an admin page decrypted a value"


def query_counts(staff: Client, targets: list[tuple[type[Model], str]]) -> dict[str, int]:
    counts = {}
    for _, target in targets:
        with CaptureQueriesContext(connection) as queries:
            assert staff.get(target).status_code == 200, target
        counts[target] = len(queries.captured_queries)
    return counts


def test_query_counts_do_not_grow_with_the_rows(world: World, staff: Client) -> None:
    """Every list and row page costs the same with one world of rows as with four."""
    first = build(world)
    targets = pages_of_every_model()
    targets += [
        (Entry, url(Entry, "changelist") + f"?q={world.bob.person.id}"),
        (Entry, url(Entry, "changelist") + f"?person={world.alice.person.id}&layer=fact"),
        (LearningRun, url(LearningRun, "changelist") + "?status=failed"),
    ]
    query_counts(staff, targets)  # a first round fills the process's caches (content types)
    before = query_counts(staff, targets)
    for _ in range(3):  # more of everything: chats, turns, items, runs, calls, entries …
        chat = ChatFactory.create(owner=world.bob, bot=world.bot)
        fact(
            [
                ItemFactory.create(chat=chat, person=world.bob.person),
                ItemFactory.create(chat=chat, person=world.bob.person),
            ]
        )
        observation([first.private], audience=f"for:person:{world.bob.person.id}")
        turn = chat_services.turn_start(chat=chat, person=world.bob.person, text="more")
        confide_hear(turn=Turn.objects.select_related("chat").get(pk=turn.pk), text="more")
        chat_services.turn_end(turn=turn)
        learning_run_process(run_id=LearningRun.objects.get(turn=turn).pk)
        Enrichment.objects.create(chat=chat, turn=turn, text="x", entry_ids=[first.private.id])
        services.person_create(organization=world.org, name="more")
        services.channel_create(organization=world.org, members=[world.bob.person])
    after = query_counts(staff, targets)
    assert after == before
    assert max(before.values()) <= 15, before


def test_entry_pages_cost_the_same_for_50_and_500_entries(world: World, staff: Client) -> None:
    def imported(start: int, count: int) -> list[ImportedEntry]:
        return [
            ImportedEntry(
                id=f"mem_bulk{n}",
                layer=Entry.Layer.FACT,
                content=CANARY,
                tags=[f"org:{world.org.id}", f"for:person:{world.bob.person.id}", f"from:u_{n}"],
                source_items=[("chat_old", n)],
            )
            for n in range(start, start + count)
        ]

    targets: list[tuple[type[Model], str]] = [
        (Entry, url(Entry, "changelist")),
        (Entry, url(Entry, "changelist") + f"?q={world.bob.person.id}"),
        (Entry, url(Entry, "changelist") + f"?organization={world.org.id}&status=active"),
        (EntryTag, url(EntryTag, "changelist")),
        (EntryTag, url(EntryTag, "changelist") + "?kind=for"),
        (Change, url(Change, "changelist")),
    ]
    entries_import(pool_id=world.bot.id, entries=imported(0, 50))
    fifty = query_counts(staff, targets)
    entries_import(pool_id=world.bot.id, entries=imported(50, 450))
    assert Entry.objects.count() == 500
    assert query_counts(staff, targets) == fifty
