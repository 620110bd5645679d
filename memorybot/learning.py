"""[W1–W8] Learning: a durable, resumable run per confided turn.

A confession stores a run for its turn [F4]. When the turn has ended (the shared event log
says so [W2]) a worker reads the chat's items after the chat's read position up to the end
of that turn, asks the model for structured changes in one recorded step [W3], and applies
them in one transaction under the pool's write lock together with the new read position and
the end of the run [W4]. Every state lives in the database: broker messages carry run ids
only [X2], and a delivery that finds the run done, claimed or not ready does nothing.
"""

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from chats.models import Chat, Event, Item, Turn
from memory import services as memory
from memory.access import Reader, audience_allowed, visible_ids
from memory.models import Change, Entry, EntryTag
from memory.selectors import learning_context
from memorybot.budget import budget_period_end
from memorybot.duty import duty_for, readers_of_chat
from memorybot.gateway import CallOutcome, learning_step_deadline_s
from memorybot.models import Confession, LearningRun, ModelCall, ModelCallEntry
from memorybot.providers import (
    EntryText,
    ItemText,
    Material,
    Message,
    ModelRequest,
    ModelResult,
    first_json_object,
)
from openbot.fields import readable

logger = logging.getLogger(__name__)

STEP = "changes"
MAX_CLAIMS = 5
LEARNING_CONTEXT_SIZE = 300
# [B8] A bounded answer: a model that rambles is cut by its server, not by the step's limit.
ANSWER_MAX_TOKENS = 1024
SOURCE_KINDS = {Item.Kind.PERSON, Item.Kind.TOOL_RESULT, Item.Kind.NOTICE}
INHERITED_KINDS = ("from", "org", "chat", "channel", "app")
ITEM_ID = re.compile(r"i-([0-9]{1,9})")

LEARN_PROMPT = (
    "You keep the notes an assistant learns from its work with people. You get the new items "
    "of a chat, the notes that exist, and the owner's rules on privacy and sharing. Propose "
    'changes as a JSON object {"changes": [...]} where each change is one of:\n'
    '- {"kind": "add", "layer": "fact", "content": str, "sources": [{"chat": id, "item": '
    '"i-<n>"}], "topics": [topic]} — something the items show; its sources must include a '
    "person's item (bot messages and notices only show where to look; a tool result alone is "
    "not enough);\n"
    '- {"kind": "add", "layer": "observation", "content": str, "sources": [{"entry": id}], '
    '"confidence": 0..1, "topics": [topic], "audience": "channel" | "bot" (optional)} — a '
    "conclusion from existing notes;\n"
    '- {"kind": "invalidate", "id": id} — a note that is no longer true;\n'
    '- {"kind": "topics", "id": id, "add": [topic], "remove": [topic]};\n'
    '- {"kind": "rename", "from": topic, "to": topic}.\n'
    'Topics are lowercase letters, digits and single hyphens. Answer {"changes": []} when '
    "there is nothing to learn."
)


def learning_run_create(*, turn: Turn) -> LearningRun:
    """[F4, W1] The run for a confided turn (one per turn, however often the bot confides)."""
    run, _ = LearningRun.objects.get_or_create(turn=turn, defaults={"chat_id": turn.chat_id})
    return run


def lease_seconds() -> float:
    """How long a worker holds a run: one step and a margin. After it, the run is free again."""
    return learning_step_deadline_s() + float(settings.OPENBOT_LEARNING_LEASE_MARGIN_SECONDS)


def runs_due() -> list[int]:
    """[W2] Runs whose wait is over (their turn ended; a budget wait passed) or whose worker
    died (its lease ran out): what the recovery pass re-enqueues. A run sent less than a
    lease ago is still queued and is not sent again, so a backlog does not grow duplicates."""
    now = timezone.now()
    ended = Event.objects.filter(kind=Event.Kind.TURN_ENDED).values("turn_id")
    return list(
        LearningRun.objects.filter(turn_id__in=ended)
        .filter(Q(status=LearningRun.Status.WAITING) | Q(status=LearningRun.Status.RUNNING))
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
        .filter(Q(sent_at__isnull=True) | Q(sent_at__lte=now - timedelta(seconds=lease_seconds())))
        .values_list("id", flat=True)
    )


def _claim(run_id: int) -> datetime | None:
    """Take the run for this worker until the lease ends, and return the lease; None if the
    run is done, leased or waiting."""
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    claimed = (
        LearningRun.objects.filter(
            id=run_id,
            status__in=[LearningRun.Status.WAITING, LearningRun.Status.RUNNING],
        )
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
        # The message that brought the run here is used up: recovery may send a new one
        # once this lease ends or the run waits for a budget period.
        .filter(claims__lt=MAX_CLAIMS)
        .update(
            status=LearningRun.Status.RUNNING,
            leased_until=lease,
            not_before=None,
            sent_at=None,
            claims=F("claims") + 1,
        )
    )
    return lease if claimed else None


def runs_give_up() -> int:
    """End, with a safe error, runs whose workers kept dying or failing on them: after
    MAX_CLAIMS claims without progress. Their read position stays, so a later confide asks
    to learn from that evidence again [B6]."""
    return (
        LearningRun.objects.filter(
            status__in=[LearningRun.Status.WAITING, LearningRun.Status.RUNNING],
            claims__gte=MAX_CLAIMS,
        )
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=timezone.now()))
        .update(
            status=LearningRun.Status.FAILED,
            error=LearningRun.Error.GAVE_UP,
            leased_until=None,
            finished_at=timezone.now(),
        )
    )


def _held(run: LearningRun, lease: datetime | None) -> QuerySet[LearningRun]:
    """The run, if it is still running under `lease`. The lease is this worker's token: a
    worker whose lease ran out and whose run another worker claimed (a new lease) changes
    nothing any more, so two deliveries never both call the model or both end the run."""
    held = LearningRun.objects.filter(id=run.id, status=LearningRun.Status.RUNNING)
    return held if lease is None else held.filter(leased_until=lease)


def _renew(run: LearningRun, lease: datetime) -> datetime | None:
    """Hold the run for one more step from now, if it is still ours (right before the model
    call: waiting for the pool's read lock may have used up the lease)."""
    renewed = timezone.now() + timedelta(seconds=lease_seconds())
    if not _held(run, lease).update(leased_until=renewed):
        return None
    run.leased_until = renewed
    return renewed


def _finish(run: LearningRun, lease: datetime | None, status: str, error: str = "") -> None:
    run.status = status
    run.error = error
    run.leased_until = None
    run.finished_at = timezone.now()
    _held(run, lease).update(
        status=status,
        error=error,
        leased_until=None,
        finished_at=run.finished_at,
        refusals=run.refusals,
        applied=run.applied,
    )


def learning_run_process(*, run_id: int) -> None:
    """Advance one run as far as it can go now; safe to call any number of times."""
    run = LearningRun.objects.select_related("chat", "turn").filter(id=run_id).first()
    if run is None or run.status in (LearningRun.Status.DONE, LearningRun.Status.FAILED):
        return
    if not Event.objects.filter(kind=Event.Kind.TURN_ENDED, turn_id=run.turn_id).exists():
        return  # [W2] the turn has not ended: the turn's end enqueues the run again
    lease = _claim(run_id)
    if lease is None:
        return
    run.refresh_from_db()
    try:
        _advance(run, lease)
    except BaseException:
        _release(run)
        raise


def _release(run: LearningRun) -> None:
    """[G1] Give back a run whose delivery failed (say, the database stayed busy past its
    timeout), so the next delivery — Dramatiq's retry, the recovery pass — takes it at once
    instead of after the lease. Should this write fail too, the lease runs out as after a
    crash. Each claim counts towards MAX_CLAIMS, so a run that keeps failing ends failed."""
    if run.leased_until is None:
        return  # the run was ending: this worker no longer knows its lease
    try:
        _held(run, run.leased_until).update(leased_until=None)
    except DatabaseError as exc:
        logger.warning("learning run %s: not given back (%s)", run.id, type(exc).__name__)


def _advance(run: LearningRun, lease: datetime) -> None:
    """The claimed run's step and apply; `run.leased_until` follows this worker's lease."""
    chat = Chat.objects.select_related("bot__source", "organization", "channel").get(id=run.chat_id)
    duty = duty_for(chat)
    if not duty.learning_on or duty.model is None:  # [W8, B1]
        _finish(run, lease, LearningRun.Status.DONE, LearningRun.Error.LEARNING_OFF)
        return
    if run.start_seq is None:
        run.start_seq = chat.read_position
        run.end_seq = run.turn.end_seq
        if not _held(run, lease).update(start_seq=run.start_seq, end_seq=run.end_seq):
            return
    if run.end_seq is None or run.start_seq >= run.end_seq:
        _finish(run, lease, LearningRun.Status.DONE)
        return
    result = _recorded_result(run)
    if result is None:
        request = _request(run, chat, duty.instructions)
        renewed = _renew(run, lease)
        if renewed is None:
            return  # another worker took the run over while this one waited to read the pool
        lease = renewed
        outcome = duty.call(
            purpose="learning",
            request=request,
            deadline_s=learning_step_deadline_s(),
            step_key=_step_key(run),
            attempt=ModelCall.objects.filter(step_key=_step_key(run)).count() + 1,
        )
        if outcome.status == ModelCall.Status.BUDGET and duty.budget_period is not None:
            # [B4] Learning waits until the next period.
            _held(run, lease).update(
                status=LearningRun.Status.WAITING,
                not_before=budget_period_end(duty.budget_period, timezone.now()),
                leased_until=None,
                claims=0,  # waiting for money is not a failure
            )
            return
        if not outcome.ok or outcome.result is None:
            # [B6] A step that failed or passed its limit ends the run safely; the read position
            # stays, so a later confide learns from this evidence again.
            _finish(run, lease, LearningRun.Status.FAILED, _cause(outcome))
            return
        result = outcome.result
    changes = _parse_changes(result.content)
    if changes is None:
        _finish(run, lease, LearningRun.Status.FAILED, LearningRun.Error.BAD_OUTPUT)
        return
    apply_learning(run=run, changes=changes, lease=lease)


def _cause(outcome: CallOutcome) -> str:
    """[A12] The code of why a learning step's model call gave no answer."""
    if outcome.status == ModelCall.Status.ERROR:
        if outcome.error_kind in (LearningRun.Error.BAD_MODEL, LearningRun.Error.BAD_OUTPUT):
            return outcome.error_kind
        return LearningRun.Error.MODEL_ERROR
    codes: dict[str, str] = {
        ModelCall.Status.TIMEOUT: LearningRun.Error.TIMEOUT,
        ModelCall.Status.NO_SLOT: LearningRun.Error.NO_SLOT,
        ModelCall.Status.BUDGET: LearningRun.Error.BUDGET,
    }
    return codes.get(outcome.status, LearningRun.Error.MODEL_ERROR)


def _step_key(run: LearningRun) -> str:
    return f"learning:{run.id}:{STEP}"


def _recorded_result(run: LearningRun) -> ModelResult | None:
    """[W3] A step that completed is never called (or billed) again: reuse its result.
    Only the result is read: the request (the items and up to 300 entries) is not decrypted.
    A result blanked by a purge or retention [P4, P5] is gone: the step is asked again."""
    result = (
        ModelCall.objects.filter(
            step_key=_step_key(run), status=ModelCall.Status.OK, blanked_at__isnull=True
        )
        .order_by("attempt")
        .values_list("result", flat=True)
        .first()
    )
    if result is None:
        return None
    return ModelResult.from_json(json.loads(result))


def _run_items(run: LearningRun) -> list[Item]:
    """The run's items; [X5] one that no key opens is left out (and logged), not fatal."""
    return readable(
        Item.objects.filter(chat_id=run.chat_id, seq__gt=run.start_seq, seq__lte=run.end_seq)
        .exclude(kind=Item.Kind.TOOL_CALL)
        .order_by("seq")
    )


def _bot_words(run: LearningRun) -> list[str]:
    """[W1] What the bot said in the run's turn: its confessions. They show the memory bot
    where to look and never become memory themselves."""
    return [confession.text for confession in readable(Confession.objects.filter(turn=run.turn))]


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


def _request(run: LearningRun, chat: Chat, instructions: str) -> ModelRequest:
    """[W5] The new items (each marked for what it is), the confession as a pointer only,
    the owner's instructions, the first 300 valid entries the run's readers may see, and
    topic counts over all valid entries of the organization."""
    items = _run_items(run)
    readers = readers_of_chat(chat, run.turn.person_id)
    known = learning_context(
        pool_id=chat.bot.pool_bot_id, reader=readers, limit=LEARNING_CONTEXT_SIZE
    )
    labels = {
        Item.Kind.PERSON: "a person said",
        Item.Kind.BOT: "the assistant said (only shows where to look)",
        Item.Kind.TOOL_RESULT: "a tool result",
        Item.Kind.NOTICE: "an OpenBot notice (not a person's words)",
    }
    lines = [
        f"[{chat.id} i-{item.seq}] {labels[Item.Kind(item.kind)]}"
        + (f" from app {item.app}" if item.app else "")
        + f": {item.text}"
        for item in items
    ]
    notes = [
        f"[{entry_id}] ({', '.join(topics) or 'no topics'}) {content}"
        for entry_id, content, topics in known.entries
    ]
    counts = ", ".join(f"{topic}: {count}" for topic, count in sorted(known.topic_counts.items()))
    confided = "\n".join(f"- {text}" for text in _bot_words(run)) or "(nothing)"
    prompt = (
        "The assistant confided during this turn: look at these items for what is worth "
        "keeping.\n\n"
        "What the assistant confided (the bot's own words: they only show where to look and "
        f"never become memory):\n{confided}\n\n"
        f"Owner's rules: {instructions or '(none)'}\n\n"
        "New items:\n" + "\n".join(lines) + "\n\n"
        "Existing notes:\n" + ("\n".join(notes) or "(none)") + "\n\n"
        f"Topic counts: {counts or '(none)'}"
    )
    return ModelRequest(
        messages=(Message.system(LEARN_PROMPT), Message.user(prompt)),
        json_output=True,
        max_output_tokens=ANSWER_MAX_TOKENS,
        material=Material(
            items=tuple(
                ItemText(chat=chat.id, item=item.public_id, kind=item.kind, text=item.text)
                for item in items
            ),
            entries=tuple(
                EntryText(id=entry_id, content=content) for entry_id, content, _ in known.entries
            ),
        ),
    )


def _parse_changes(content: str | None) -> list[Any] | None:
    data = first_json_object(content)
    if data is None or not isinstance(data.get("changes"), list):
        return None
    changes: list[Any] = data["changes"]
    return changes


class Refused(Exception):
    """A proposed change that is not applied; `reason` is recorded on the run [W7]."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Apply:
    """What one apply knows: the run, its chat, its readers and the range still to learn."""

    run: LearningRun
    chat: Chat
    readers: Reader
    first_seq: int
    change: memory.PoolChange
    # [W1] The bot's words in the run (confessions, its messages), normalized: a change whose
    # content is only those words is refused.
    bot_words: frozenset[str] = frozenset()


def apply_learning(*, run: LearningRun, changes: list[Any], lease: datetime | None = None) -> None:
    """[W4, W6, W7] Apply what may be applied, refuse the rest per change, advance the read
    position and end the run — one transaction under the pool's write lock.

    Applies nothing if the run has ended meanwhile, or (with `lease`) if another worker has
    claimed it since: a delivery whose lease ran out while it waited for the lock must not
    apply the same answer a second time."""
    chat = Chat.objects.select_related("bot__source", "organization", "channel").get(id=run.chat_id)
    refusals: list[dict[str, Any]] = []
    said_by_bot = readable(
        Item.objects.filter(
            chat_id=run.chat_id,
            kind=Item.Kind.BOT,
            seq__gt=run.start_seq or 0,
            seq__lte=run.end_seq or 0,
        )
    )
    bot_words = frozenset(
        _words(text) for text in [*_bot_words(run), *(item.text for item in said_by_bot)]
    )
    with memory.pool_change(pool_id=chat.bot.pool_bot_id, by=Change.By.MEMORY_BOT) as change:
        # [L1, W6] The readers' rights as of now, read under the write lock.
        readers = readers_of_chat(chat, run.turn.person_id).as_of_now()
        if _held(run, lease).select_for_update().values_list("id", flat=True).first() is None:
            return
        # The newest read position, locked: evidence another run applied is never applied again.
        position = Chat.objects.select_for_update().values_list("read_position", flat=True)
        read_position = position.get(id=chat.id)
        state = _Apply(
            run=run,
            chat=chat,
            readers=readers,
            first_seq=max(read_position, run.start_seq or 0) + 1,
            change=change,
            bot_words=bot_words,
        )
        for index, proposed in enumerate(changes):
            try:
                with transaction.atomic():
                    _apply_one(state, proposed)
            except Refused as refusal:
                refusals.append({"change": index, "reason": refusal.reason})
        # [P4] The step's answer carries the content of the entries it created or changed.
        ModelCallEntry.objects.bulk_create(
            [
                ModelCallEntry(call_id=call_id, entry_id=entry_id)
                for call_id in ModelCall.objects.filter(
                    step_key=_step_key(run), blanked_at__isnull=True
                ).values_list("id", flat=True)
                for entry_id in change.touched
            ],
            ignore_conflicts=True,
        )
        if run.end_seq is not None and run.end_seq > read_position:
            Chat.objects.filter(id=chat.id).update(read_position=run.end_seq)
        run.refusals = refusals
        run.applied = len(changes) - len(refusals)
        _finish(run, lease, LearningRun.Status.DONE)
    if refusals:
        logger.info("learning run %s: %d change(s) refused", run.id, len(refusals))


def _apply_one(state: _Apply, proposed: Any) -> None:
    if not isinstance(proposed, dict):
        raise Refused("not_a_change")
    kind = proposed.get("kind")
    if kind == "add" and proposed.get("layer") == "fact":
        _add_fact(state, proposed)
    elif kind == "add" and proposed.get("layer") == "observation":
        _add_observation(state, proposed)
    elif kind == "invalidate":
        entry_id = _visible_entry(state, proposed.get("id"))
        memory.entry_set_status_in(state.change, entry_id=entry_id, status=Entry.Status.INVALIDATED)
    elif kind == "topics":
        entry_id = _visible_entry(state, proposed.get("id"))
        memory.entry_topics_in(
            state.change,
            entry_id=entry_id,
            add=_topics(proposed.get("add", [])),
            remove=_topics(proposed.get("remove", [])),
        )
    elif kind == "rename":
        old, new = _topics([proposed.get("from")]), _topics([proposed.get("to")])
        memory.topic_rename_in(state.change, old=old[0], new=new[0])
    else:
        raise Refused("unknown_change")


def _topics(value: Any) -> list[str]:
    """[E3, W7] Topics only: colon tags and bad topics are refused."""
    if not isinstance(value, list) or not all(isinstance(topic, str) for topic in value):
        raise Refused("bad_topic")
    if any(":" in topic for topic in value):
        raise Refused("colon_tag")
    if not all(memory.is_topic(topic) for topic in value):
        raise Refused("bad_topic")
    return list(dict.fromkeys(value))


def _content(state: _Apply, proposed: dict[str, Any]) -> str:
    content = proposed.get("content")
    if not isinstance(content, str) or not content.strip() or len(content) > memory.MAX_CONTENT:
        raise Refused("bad_content")
    if _words(content) in state.bot_words:
        raise Refused("bot_words_as_content")  # [W1] they point; they never become memory
    return content.strip()


def _visible_entry(state: _Apply, entry_id: Any) -> str:
    """[W6, V7] An entry the run's readers may use now: active, visible, newest state."""
    if not isinstance(entry_id, str) or not visible_ids(
        pool_id=state.change.pool_id, reader=state.readers, ids=[entry_id], active_only=True
    ):
        raise Refused("source_not_visible")
    return entry_id


def _add_fact(state: _Apply, proposed: dict[str, Any]) -> None:
    """[W7] A fact: its sources are items of this run's range; OpenBot builds its tags and
    evidence from stored data — the turn persons, chat, channel, organization and app."""
    content, topics = _content(state, proposed), _topics(proposed.get("topics", []))
    sources = proposed.get("sources")
    if not isinstance(sources, list) or not sources:
        raise Refused("no_sources")
    seqs: list[int] = []
    for source in sources:
        item = source.get("item") if isinstance(source, dict) else None
        # ASCII digits only: str.isdigit() also accepts "²", which int() cannot read.
        found = ITEM_ID.fullmatch(item) if isinstance(item, str) else None
        if not isinstance(source, dict) or source.get("chat") != state.chat.id or found is None:
            raise Refused("source_outside_range")
        seqs.append(int(found.group(1)))
    seqs = list(dict.fromkeys(seqs))
    if any(seq < state.first_seq or seq > (state.run.end_seq or 0) for seq in seqs):
        raise Refused("source_outside_range")
    # Only metadata is checked: the sources' text is neither needed nor decrypted.
    items = list(
        Item.objects.select_related("turn")
        .defer("text")
        .filter(chat_id=state.chat.id, seq__in=seqs)
    )
    if len(items) != len(seqs):
        raise Refused("source_missing")
    if any(item.kind not in SOURCE_KINDS for item in items):
        raise Refused("bot_words_as_source")  # [W1] the bot's words never become memory
    if not any(item.kind == Item.Kind.PERSON for item in items):
        raise Refused("no_person_source")  # tool results and notices never alone
    chat = state.chat
    tags: list[str] = []
    evidence: list[memory.ItemEvidence] = []
    for item in sorted(items, key=lambda item: item.seq):
        person_id = item.turn.person_id if item.turn is not None else None
        if item.kind == Item.Kind.PERSON:
            if person_id is None:
                raise Refused("no_person_source")
            tags.append(f"from:{person_id}")
        if item.kind == Item.Kind.TOOL_RESULT and (item.tool or item.app):
            tags.append(f"app:{item.tool or item.app}")  # [E3] `app:<tool>`
        # [V2, V3] The access rule of each source item, stored with the entry.
        rule = (
            f"channel:{chat.channel_id}"
            if chat.channel_id is not None
            else f"person:{person_id or chat.owner_id}"
        )
        evidence.append(
            memory.ItemEvidence(
                chat_id=chat.id, item_seq=item.seq, rule=rule, organization_id=chat.organization_id
            )
        )
    audience = sorted({f"for:{proof.rule}" for proof in evidence})
    tags += audience + [f"org:{chat.organization_id}", f"chat:{chat.id}"]
    if chat.channel_id is not None:
        tags.append(f"channel:{chat.channel_id}")
    memory.entry_create_in(
        state.change,
        layer=Entry.Layer.FACT,
        content=content,
        tags=tags + topics,
        source_items=[(chat.id, item.seq) for item in sorted(items, key=lambda item: item.seq)],
        evidence=evidence,
    )


def _add_observation(state: _Apply, proposed: dict[str, Any]) -> None:
    """[W7, V5] An observation over entries the run's readers may see; it carries the
    `from:`, `org:`, `chat:`, `channel:`, `app:` tags of all its sources so purge reaches it,
    and an audience every source allows."""
    content, topics = _content(state, proposed), _topics(proposed.get("topics", []))
    confidence = proposed.get("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        raise Refused("bad_confidence")
    sources = proposed.get("sources")
    if not isinstance(sources, list) or not sources:
        raise Refused("no_sources")
    source_ids = [source.get("entry") if isinstance(source, dict) else None for source in sources]
    if not all(isinstance(source_id, str) for source_id in source_ids):
        raise Refused("source_not_visible")
    ids = list(dict.fromkeys(str(source_id) for source_id in source_ids))
    if set(ids) != visible_ids(
        pool_id=state.change.pool_id, reader=state.readers, ids=ids, active_only=True
    ):
        raise Refused("source_not_visible")
    source_tags = EntryTag.objects.filter(entry_id__in=ids)
    inherited = list(
        dict.fromkeys(
            source_tags.filter(kind__in=INHERITED_KINDS)
            .order_by("id")
            .values_list("tag", flat=True)
        )
    )
    for_sets: dict[str, set[str]] = {source_id: set() for source_id in ids}
    for source_id, tag in source_tags.filter(kind="for").values_list("entry_id", "tag"):
        for_sets[source_id].add(tag)
    common = sorted(set.intersection(*for_sets.values()))
    wanted = proposed.get("audience")
    if wanted is None:
        audience = common or [_readers_tag(state.readers)]
    elif wanted == "bot":
        audience = ["for:bot"]
    elif wanted == "channel" and state.chat.channel_id is not None:
        audience = [f"for:channel:{state.chat.channel_id}"]
    else:
        raise Refused("bad_audience")
    if not all(audience_allowed(source_ids=ids, audience=tag) for tag in audience):
        raise Refused("audience_too_wide")  # [V5]
    memory.entry_create_in(
        state.change,
        layer=Entry.Layer.OBSERVATION,
        content=content,
        tags=inherited + audience + topics,
        source_entries=ids,
        confidence=float(confidence),
    )


def _readers_tag(readers: Reader) -> str:
    if readers.circle_id is not None:
        return f"for:channel:{readers.circle_id}"
    return f"for:person:{readers.person_id}"
