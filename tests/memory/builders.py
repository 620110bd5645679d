"""Small builders for memory tests, all through the real services.

Chats and items go through `chats.services`; entries through `memory.services`, with the
OpenBot-owned tags and the access evidence built the way learning builds them [V2, V3, W7]:
a fact is `from:` the stored turn persons of its items and `for:` the person of the turn (a
private chat) or the channel group (a group chat).
"""

from collections.abc import Iterable

from chats import services as chat_services
from chats.models import Chat, Item
from memory.models import Change, Entry, EntryTag
from memory.services import ItemEvidence, entry_create_in, entry_set_status_in, pool_change
from openbot.models import Bot, Channel
from tests.conftest import Actor

# The OpenBot-owned tags an observation carries over from its sources, so purge reaches it.
INHERITED_KINDS = ("from", "org", "chat", "channel", "app")


def chat_for(actor: Actor, bot: Bot, channel: Channel | None = None) -> Chat:
    """A chat owned by `actor` (a group chat when `channel` is given)."""
    return chat_services.chat_create(
        caller=actor.caller, bot_id=bot.id, channel_id=channel.id if channel else None, test=False
    )


def say(chat: Chat, actor: Actor, text: str = "something worth keeping") -> Item:
    """`actor` takes a turn in `chat` that the bot leaves unanswered (every turn ends [C6]);
    returns the turn's input item."""
    turn = chat_services.turn_start(chat=chat, person=actor.person, text=text)
    chat_services.turn_end(turn=turn)
    return Item.objects.get(chat=chat, seq=turn.input_seq)


def fact(
    items: Iterable[Item],
    *,
    content: str = "a fact",
    topics: Iterable[str] = (),
    by: str = Change.By.MEMORY_BOT,
) -> Entry:
    """A fact learned from person items of one chat, tagged and evidenced per [V2, V3, W7]."""
    items = list(items)
    chat = Chat.objects.select_related("bot").get(pk=items[0].chat_id)
    people = list(dict.fromkeys(item.turn.person_id for item in items if item.turn))
    if chat.channel_id:
        rules = [f"channel:{chat.channel_id}"] * len(items)
        audience = [f"for:channel:{chat.channel_id}"]
        where = [f"chat:{chat.id}", f"channel:{chat.channel_id}"]
    else:
        rules = [f"person:{item.turn.person_id}" for item in items if item.turn]
        audience = [f"for:person:{person}" for person in people]
        where = [f"chat:{chat.id}"]
    tags = [f"from:{person}" for person in people] + audience + [f"org:{chat.organization_id}"]
    with pool_change(pool_id=chat.bot.pool_bot_id, by=by) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.FACT,
            content=content,
            tags=tags + where + list(topics),
            source_items=[(chat.id, item.seq) for item in items],
            evidence=[
                ItemEvidence(
                    chat_id=chat.id,
                    item_seq=item.seq,
                    rule=rule,
                    organization_id=chat.organization_id,
                )
                for item, rule in zip(items, rules, strict=True)
            ],
        )


def observation(
    sources: Iterable[Entry],
    *,
    audience: str,
    content: str = "an observation",
    confidence: float = 0.7,
    topics: Iterable[str] = (),
) -> Entry:
    """An observation over `sources` for `audience`, carrying their where-from tags [W7]."""
    sources = list(sources)
    inherited = EntryTag.objects.filter(entry__in=sources, kind__in=INHERITED_KINDS).values_list(
        "tag", flat=True
    )
    with pool_change(pool_id=sources[0].bot_id, by=Change.By.MEMORY_BOT) as change:
        return entry_create_in(
            change,
            layer=Entry.Layer.OBSERVATION,
            content=content,
            tags=sorted(set(inherited)) + [audience] + list(topics),
            source_entries=[source.id for source in sources],
            confidence=confidence,
        )


def set_status(entry: Entry, status: str) -> None:
    """The memory bot marks `entry` invalidated (or retracted) [E5]."""
    with pool_change(pool_id=entry.bot_id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=entry.id, status=status)
