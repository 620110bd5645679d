"""Writes for chat storage: chats, items, turns and the events they raise."""

from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chats.models import Chat, Event, Item, Turn
from openbot.access import Caller, bot_for_reader
from openbot.errors import NotFound
from openbot.idempotency import UNCLAIMED, Claim
from openbot.models import Channel, ChannelMember, Person

MAX_TEXT = 32_000


@transaction.atomic
def chat_create(*, caller: Caller, bot_id: str, channel_id: str | None, test: bool) -> Chat:
    """[C4] A chat owned by the caller; a group chat needs the caller in the channel."""
    bot = bot_for_reader(caller=caller, bot_id=bot_id)
    channel = None
    if channel_id is not None:
        channel = Channel.objects.filter(id=channel_id, organization=caller.organization).first()
        if (
            channel is None
            or not ChannelMember.objects.filter(channel=channel, person=caller.person).exists()
        ):
            raise NotFound(f"channel {channel_id} not found")
    return Chat.objects.create(
        bot=bot,
        organization=caller.organization,
        owner=caller.person,
        channel=channel,
        test=test,
    )


@transaction.atomic
def item_append(
    *,
    chat: Chat,
    kind: str,
    text: str,
    turn: Turn | None = None,
    app: str | None = None,
    tool: str | None = None,
) -> Item:
    """Append an item with the chat's next sequence number."""
    Chat.objects.filter(pk=chat.pk).update(last_seq=F("last_seq") + 1)
    seq = Chat.objects.values_list("last_seq", flat=True).get(pk=chat.pk)
    chat.last_seq = seq
    return Item.objects.create(
        chat=chat, seq=seq, kind=kind, text=text, turn=turn, app=app, tool=tool
    )


@transaction.atomic
def notice_append(*, chat: Chat, text: str, turn: Turn | None = None) -> Item:
    """An OpenBot notice: a message from OpenBot itself, never a person's words."""
    return item_append(chat=chat, kind=Item.Kind.NOTICE, text=text, turn=turn)


@transaction.atomic
def tool_result_append(
    *, chat: Chat, app: str, tool: str, text: str, turn: Turn | None = None
) -> Item:
    """A tool result from an app; `app` names it."""
    return item_append(
        chat=chat, kind=Item.Kind.TOOL_RESULT, text=text, turn=turn, app=app, tool=tool
    )


@transaction.atomic
def turn_start(
    *,
    chat: Chat,
    person: Person | None,
    text: str,
    notice: bool = False,
    claim: Claim = UNCLAIMED,
) -> Turn:
    """[C3] Store the input item and the turn with its person (none for a notice); the
    turn is recorded for the request's `Idempotency-Key` (`claim`) in the same transaction."""
    Chat.objects.select_for_update().filter(pk=chat.pk).first()
    turn = Turn.objects.create(chat=chat, person=None if notice else person, input_seq=0)
    kind = Item.Kind.NOTICE if notice else Item.Kind.PERSON
    item = item_append(chat=chat, kind=kind, text=text, turn=turn)
    turn.input_seq = item.seq
    turn.save(update_fields=["input_seq"])
    claim.made(str(turn.pk))
    return turn


@transaction.atomic
def turn_end(*, turn: Turn, error: str = "") -> Event:
    """End the turn and record "turn ended" on the shared event log; `error` is the
    code of what went wrong in it."""
    end_seq = Chat.objects.values_list("last_seq", flat=True).get(pk=turn.chat_id)
    turn.end_seq = end_seq
    turn.ended_at = timezone.now()
    turn.error = error
    turn.save(update_fields=["end_seq", "ended_at", "error"])
    event, _ = Event.objects.get_or_create(
        kind=Event.Kind.TURN_ENDED, turn=turn, defaults={"chat_id": turn.chat_id}
    )
    return event


def turns_end_abandoned(*, started_before: datetime) -> int:
    """End the turns whose serving process stopped mid-turn (killed, a lost machine):
    started before `started_before` — well past the turn's deadline — and never ended. Their
    learning runs then go on. Returns how many."""
    ended = 0
    for turn in Turn.objects.filter(ended_at__isnull=True, started_at__lt=started_before):
        with transaction.atomic():
            # The row is locked and read again: a turn that ended meanwhile stays as it is.
            if Turn.objects.select_for_update().filter(pk=turn.pk, ended_at__isnull=True).exists():
                turn_end(turn=turn, error=Turn.Error.ABANDONED)
                ended += 1
    return ended


@transaction.atomic
def chat_history_delete(*, chat: Chat) -> int:
    """[P3] Delete the chat's items; memory learned from them stays."""
    deleted, _ = Item.objects.filter(chat=chat).delete()
    return deleted
