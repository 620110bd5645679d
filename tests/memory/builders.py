"""Small builders for memory tests, all through the real services.

Chats and items come from `tests.factories`; entries through `memory.learned`, the service
learning applies its changes with, so their OpenBot-owned tags and access evidence are the
ones learning builds [V2, V3, W7]: a fact is `from:` the stored turn persons of its items and
`for:` the person of the turn (a private chat) or the channel group (a group chat).
"""

from collections.abc import Iterable

from chats.models import Chat, Item
from memory.learned import ChatPlace, SourceItem, fact_create_in, observation_create_in
from memory.models import Change, Entry
from memory.services import entry_set_status_in, pool_change


def fact(
    items: Iterable[Item],
    *,
    content: str = "a fact",
    topics: Iterable[str] = (),
    by: str = Change.By.MEMORY_BOT,
) -> Entry:
    """A fact learned from person items of one chat, tagged and evidenced as learning does
    it [V2, V3, W7]."""
    items = list(items)
    chat = Chat.objects.select_related("bot").get(pk=items[0].chat_id)
    place = ChatPlace(
        chat_id=chat.id,
        organization_id=chat.organization_id,
        owner_id=chat.owner_id,
        channel_id=chat.channel_id,
    )
    with pool_change(pool_id=chat.bot.pool_bot_id, by=by) as change:
        return fact_create_in(
            change,
            place=place,
            items=[
                SourceItem(seq=item.seq, kind=item.kind, person_id=item.turn.person_id)
                for item in items
                if item.turn
            ],
            content=content,
            topics=list(topics),
        )


def observation(
    sources: Iterable[Entry],
    *,
    audience: str,
    content: str = "an observation",
    confidence: float = 0.7,
    topics: Iterable[str] = (),
) -> Entry:
    """An observation over `sources` for `audience`, carrying their where-from tags [W7]; the
    audience is not checked, so tests can build what learning would refuse [V5]."""
    sources = list(sources)
    with pool_change(pool_id=sources[0].bot_id, by=Change.By.MEMORY_BOT) as change:
        return observation_create_in(
            change,
            source_ids=[source.id for source in sources],
            audience=[audience],
            content=content,
            confidence=confidence,
            topics=list(topics),
        )


def set_status(entry: Entry, status: str) -> None:
    """The memory bot marks `entry` invalidated (or retracted) [E5]."""
    with pool_change(pool_id=entry.bot_id, by=Change.By.MEMORY_BOT) as change:
        entry_set_status_in(change, entry_id=entry.id, status=status)
