"""[D1] Everything about a person, exported: one JSON document, written piece by piece so that
memory stays flat in the size of the export.

What it holds, in the token's organization: the person and their channels; for every bot they
may read, the entries GET memory lists them (the history view, paged the same way, so never
more); their chats with items, enrichments (as GET …/enrichments shows them) and
learning runs; their tokens' metadata, never a secret. `format` says the document's version.
"""

import json
from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse
from django.utils import timezone

from chats.models import Chat, Item
from conversations.serializers import ChatOutput, EnrichmentOutput, ItemOutput, RunOutput
from memory.access import Reader
from memory.selectors import Position, entry_page_for_reader
from memory.serializers import EntryOutput
from memorybot.selectors import enrichments_of_chat, learning_runs_of_chat
from openbot.access import bots_for_reader
from openbot.clock import to_ms
from openbot.fields import readable
from openbot.models import Bot, Channel, Organization, Person, Token

FORMAT = 1
# Entries or items read (and held) at a time.
PAGE = 500


def export_response(*, person: Person, organization: Organization) -> StreamingHttpResponse:
    """The export as a download, streamed."""
    response = StreamingHttpResponse(
        person_export(person=person, organization=organization), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="openbot-export-{person.id}.json"'
    return response


def person_export(*, person: Person, organization: Organization) -> Iterator[str]:
    """The export of `person` in `organization`, as pieces of one JSON document."""
    head = {
        "format": FORMAT,
        "exportedAt": to_ms(timezone.now()),
        "organization": {"id": organization.id, "name": organization.name},
        "person": {"id": person.id, "name": person.name, "learnFromMe": person.learn_from_me},
        "channels": [
            {"id": channel.id, "name": channel.name}
            for channel in Channel.objects.filter(
                organization=organization, members=person
            ).order_by("id")
        ],
        "tokens": [
            {
                "id": token.pk,
                "createdAt": to_ms(token.created_at),
                "expiresAt": token.expires_at and to_ms(token.expires_at),
                "lastUsedAt": token.last_used_at and to_ms(token.last_used_at),
            }
            for token in Token.objects.filter(person=person, organization=organization).order_by(
                "pk"
            )
        ],
    }
    yield json.dumps(head)[:-1]
    yield ', "memory": ['
    bots = bots_for_reader(person_id=person.id, organization_id=organization.id).order_by("id")
    yield from _joined(_memory(bot, person, organization) for bot in bots)
    yield '], "chats": ['
    chats = Chat.objects.filter(owner=person, organization=organization).order_by("created_at")
    yield from _joined(_chat(chat) for chat in chats.select_related("bot", "channel"))
    yield "]}\n"


def _joined(parts: Iterable[Iterable[str]]) -> Iterator[str]:
    """The pieces of each part, the parts separated by commas."""
    for index, part in enumerate(parts):
        if index:
            yield ", "
        yield from part


def _memory(bot: Bot, person: Person, organization: Organization) -> Iterator[str]:
    """A bot's memory as GET memory lists it to the person, a page at a time."""
    reader = Reader(organization_id=organization.id, person_id=person.id, bot=bot)
    yield json.dumps({"bot": {"id": bot.id, "name": bot.name}})[:-1] + ', "entries": ['
    after: Position | None = None
    first, version = True, 0
    while True:
        entries, version, after = entry_page_for_reader(
            pool_id=bot.pool_bot_id, reader=reader, tags=[], after=after, limit=PAGE
        )
        for entry in entries:
            yield ("" if first else ", ") + json.dumps(EntryOutput(entry).data)
            first = False
        if after is None:
            break
    yield f'], "version": {version}}}'


def _chat(chat: Chat) -> Iterator[str]:
    """A chat with its items, enrichments and learning runs."""
    yield json.dumps(ChatOutput(chat).data)[:-1] + ', "items": ['
    yield from _joined((json.dumps(ItemOutput(item).data),) for item in _items(chat))
    enrichments = EnrichmentOutput(enrichments_of_chat(chat=chat)[0], many=True).data
    runs = RunOutput(learning_runs_of_chat(chat_id=chat.id)[0], many=True).data
    yield f'], "enrichments": {json.dumps(enrichments)}, "learningRuns": {json.dumps(runs)}}}'


def _items(chat: Chat) -> Iterator[Item]:
    """The chat's items in order, `PAGE` at a time; one no key opens is left out (and
    logged)."""
    items = Item.objects.filter(chat=chat).order_by("seq")
    seq = 0
    while seqs := list(items.filter(seq__gt=seq).values_list("seq", flat=True)[:PAGE]):
        yield from readable(items.filter(seq__in=seqs))
        seq = seqs[-1]
