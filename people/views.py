"""[U1] "My memory": a person's page about what bots remember about them.

Every view reads and changes memory through the services the API uses, as the signed-in person
in the organization they signed in to: a bot is found through `bot_for_reader`, the entries are
exactly GET memory's listing (`entries_for_reader`), search is the API's search, and Remember,
Forget and "forget everything" are the API's commands. Another person's bot, entry or chat is
the same "not found" page as one that does not exist. Plain forms do everything; the script
only shows times in the browser's time zone.
"""

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chats.models import Chat
from chats.selectors import chat_for_owner
from conversations.export import export_response
from memory.access import Reader
from memory.forgetting import entries_forget_mine, entry_forget
from memory.models import Entry
from memory.search import search
from memory.selectors import entries_for_reader, entry_for_reader
from memory.services import REMEMBER_MAX_CONTENT, check_topics, entry_remember
from memorybot.selectors import learning_runs_of_chat
from openbot.access import Caller, bot_for_reader, bots_for_reader
from openbot.errors import ApplicationError, Conflict, NotFound, invalid
from openbot.models import Bot
from openbot.services import person_learning_set
from openbot.throttles import SessionWriteThrottle
from people.services import sign_in_link_use, sign_out, signed_in_caller

SEARCH_RESULTS = 20
# As many topics as Remember takes through the API.
MAX_TOPICS = 32
CallerView = Callable[..., HttpResponseBase]


def signed_in(view: CallerView) -> CallerView:
    """The view with the signed-in caller as its second argument; signed out, a page that says
    how to sign in (401). A change counts against the person's writes [T1] (429 beyond them).
    Nothing about a person is cached by the browser or on the way."""

    @never_cache
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        caller = signed_in_caller(request)
        if caller is None:
            return render(request, "people/signed_out.html", status=401)
        throttle = SessionWriteThrottle(caller.person.id)
        if not throttle.allow_request(request, None):  # type: ignore[arg-type]  # no view needed
            wait = math.ceil(throttle.wait() or 1)
            response = render(
                request, "people/slow_down.html", {"caller": caller, "wait": wait}, status=429
            )
            response["Retry-After"] = str(wait)
            return response
        try:
            return view(request, caller, *args, **kwargs)
        except NotFound:
            return render(request, "people/not_found.html", {"caller": caller}, status=404)

    return wrapped


@dataclass(frozen=True)
class Origin:
    """Where an entry was learned: a chat (linked to its learning runs when it is the
    person's own), or another entry."""

    text: str
    chat_id: str | None = None
    when: datetime | None = None


@dataclass(frozen=True)
class Shown:
    """An entry as the page shows it."""

    id: str
    layer: str
    content: str
    topics: list[str]
    active: bool
    said: datetime
    origins: list[Origin]


def moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def reader_for(caller: Caller, bot: Bot) -> Reader:
    return Reader(organization_id=caller.organization.id, person_id=caller.person.id, bot=bot)


def _shown(rows: list[dict[str, Any]], caller: Caller) -> list[Shown]:
    chat_ids = {s["chat_id"] for row in rows for s in row["sources"] if s["chat_id"]}
    chats = {
        chat.id: chat
        for chat in Chat.objects.filter(id__in=chat_ids)
        .select_related("channel")
        .only("id", "owner_id", "created_at", "channel__name")
    }

    def origin(source: dict[str, Any]) -> Origin:
        if source["source_entry_id"] is not None:
            return Origin("another entry")
        chat = chats.get(source["chat_id"])
        if chat is None:
            return Origin("a chat that no longer exists")
        if chat.owner_id == caller.person.id:
            return Origin("your chat", chat.id, chat.created_at)
        if chat.channel is not None:
            name = chat.channel.name or "a channel"
            return Origin(f"a group chat in {name}", when=chat.created_at)
        return Origin("another person's chat", when=chat.created_at)

    shown = []
    for row in rows:
        origins = list(dict.fromkeys(origin(source) for source in row["sources"]))
        if not origins and row["layer"] == Entry.Layer.PINNED:
            origins = [Origin("you asked the bot to remember it")]
        shown.append(
            Shown(
                id=row["id"],
                layer=row["layer"],
                content=row["content"],
                topics=[tag for tag in row["tags"] if ":" not in tag],
                active=row["status"] == Entry.Status.ACTIVE,
                said=moment(row["said_at"]),
                origins=origins,
            )
        )
    return shown


@require_http_methods(["GET", "POST"])
@never_cache
def sign_in(request: HttpRequest, signed: str) -> HttpResponse:
    """The link shows a button; pressing it spends the link (a link previewer that only
    fetches the page does not)."""
    if request.method == "POST":
        if sign_in_link_use(request, signed):
            return redirect("people:home")
        return render(request, "people/link_refused.html", status=400)
    return render(request, "people/sign_in.html")


@require_POST
@never_cache
def sign_out_view(request: HttpRequest) -> HttpResponse:
    sign_out(request)
    return render(request, "people/signed_out.html", {"signed_out": True})


@require_GET
@signed_in
def home(request: HttpRequest, caller: Caller) -> HttpResponse:
    bots = bots_for_reader(person_id=caller.person.id, organization_id=caller.organization.id)
    return render(request, "people/home.html", {"caller": caller, "bots": bots})


def _bot_page(
    request: HttpRequest,
    caller: Caller,
    bot: Bot,
    *,
    form: dict[str, str] | None = None,
    form_error: str | None = None,
    status: int = 200,
) -> HttpResponse:
    reader = reader_for(caller, bot)
    query = request.GET.get("q", "").strip()
    # Topics are stored in NFC (as GET memory's `tags` reads them): one written decomposed
    # finds them too.
    topic = unicodedata.normalize("NFC", request.GET.get("topic", "").strip())
    history = request.GET.get("history") == "1"
    search_error = None
    if query:
        try:
            rows, _ = search(bot, reader, query, SEARCH_RESULTS)
        except ApplicationError as exc:
            rows, search_error, status = [], _said(exc), 400
    else:
        rows, _ = entries_for_reader(
            pool_id=bot.pool_bot_id, reader=reader, tags=[topic] if topic else []
        )
    entries = _shown(rows, caller)
    topics = sorted({name for entry in entries for name in entry.topics})
    if not history:
        entries = [entry for entry in entries if entry.active]
    context = {
        "caller": caller,
        "bot": bot,
        "entries": entries,
        "topics": topics,
        "query": query,
        "topic": topic,
        "history": history,
        "search_error": search_error,
        "form": form or {"content": "", "topics": ""},
        "form_error": form_error,
        "max_content": REMEMBER_MAX_CONTENT,
    }
    return render(request, "people/bot.html", context, status=status)


def _said(exc: ApplicationError) -> str:
    """A service's message for a person: the field it names is the form's, so it is left out."""
    for messages_of_field in (exc.fields or {}).values():
        return "; ".join(messages_of_field)
    return exc.message


@require_GET
@signed_in
def bot_memory(request: HttpRequest, caller: Caller, bot_id: str) -> HttpResponse:
    return _bot_page(request, caller, bot_for_reader(caller=caller, bot_id=bot_id))


@require_POST
@signed_in
def remember(request: HttpRequest, caller: Caller, bot_id: str) -> HttpResponse:
    """Remember what the person writes, with the topics they list (any case, commas or spaces
    between); what they wrote stays in the form when it is refused."""
    bot = bot_for_reader(caller=caller, bot_id=bot_id)
    form = {"content": request.POST.get("content", ""), "topics": request.POST.get("topics", "")}
    try:
        content = form["content"].strip()
        if not content:
            raise invalid("content", "Write what the bot should remember.")
        if "\x00" in content:
            raise invalid("content", "It may not contain NUL characters.")
        names = [name.lower() for name in re.split(r"[,\s]+", form["topics"]) if name]
        if len(names) > MAX_TOPICS:
            raise invalid("topics", f"At most {MAX_TOPICS} topics.")
        topics = check_topics(names, "topics")
        entry_remember(
            pool_id=bot.pool_bot_id,
            person_id=caller.person.id,
            organization_id=caller.organization.id,
            content=content,
            topics=topics,
        )
    except ApplicationError as exc:
        return _bot_page(request, caller, bot, form=form, form_error=_said(exc), status=400)
    messages.success(request, "Remembered. Only you will see it.")
    return redirect("people:bot", bot_id=bot.id)


@require_http_methods(["GET", "POST"])
@signed_in
def forget(request: HttpRequest, caller: Caller, bot_id: str, entry_id: str) -> HttpResponse:
    """A confirmation, then the API's Forget of the person's part of the entry."""
    bot = bot_for_reader(caller=caller, bot_id=bot_id)
    reader = reader_for(caller, bot)
    row = entry_for_reader(pool_id=bot.pool_bot_id, reader=reader, entry_id=entry_id)
    if row is None:
        raise NotFound(f"entry {entry_id} not found")
    if request.method == "POST":
        try:
            entry_forget(pool_id=bot.pool_bot_id, reader=reader, entry_id=entry_id)
        except Conflict:
            messages.error(request, "This entry is no longer yours to forget.")
        else:
            messages.success(request, "Forgotten. The bot no longer uses it for you.")
        return redirect("people:bot", bot_id=bot.id)
    entry = _shown([row], caller)[0]
    return render(request, "people/forget.html", {"caller": caller, "bot": bot, "entry": entry})


@require_http_methods(["GET", "POST"])
@signed_in
def forget_everything(request: HttpRequest, caller: Caller, bot_id: str) -> HttpResponse:
    """A confirmation, then [D2] ForgetMine: every entry the person is behind, in one change."""
    bot = bot_for_reader(caller=caller, bot_id=bot_id)
    if request.method == "POST":
        done = entries_forget_mine(pool_id=bot.pool_bot_id, reader=reader_for(caller, bot))
        count = done.retracted + done.excluded
        messages.success(
            request,
            f"Forgotten: {count} {'entry' if count == 1 else 'entries'}. The bot no longer "
            "uses anything you told it.",
        )
        return redirect("people:bot", bot_id=bot.id)
    return render(request, "people/forget_everything.html", {"caller": caller, "bot": bot})


@require_POST
@signed_in
def learning_setting(request: HttpRequest, caller: Caller) -> HttpResponse:
    """[D4] Whether learning may use what the person says, in every chat (`learnFromMe`)."""
    learn = request.POST.get("learn") == "on"
    person_learning_set(person=caller.person, learn_from_me=learn)
    if learn:
        messages.success(request, "Bots may learn from what you say again.")
    else:
        messages.success(
            request,
            "Bots no longer learn from what you say. What they learned before stays until you "
            "forget it.",
        )
    return redirect("people:home")


@require_GET
@signed_in
def chat_learning(request: HttpRequest, caller: Caller, chat_id: str) -> HttpResponse:
    """What learning did with one of the person's chats: each run's status and refusal codes."""
    chat = chat_for_owner(caller=caller, chat_id=chat_id)
    runs, _ = learning_runs_of_chat(chat_id=chat.id)
    return render(request, "people/chat.html", {"caller": caller, "chat": chat, "runs": runs})


@require_GET
@signed_in
def export(request: HttpRequest, caller: Caller) -> StreamingHttpResponse:
    """[D1] The person's data, the API's export."""
    return export_response(person=caller.person, organization=caller.organization)
