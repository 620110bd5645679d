"""`MemoryClient`: every `/v1` operation of OpenBot Bot Memory as a typed method.

Errors are one exception type, `MemoryApiError`, with the API's error shape (a server that
cannot be reached at all raises httpx's own `httpx.TransportError`). A request answered 429
(throttled: nothing was done) is sent again after the `Retry-After` the server gave; one answered
503 too, if it is a read or carries an `Idempotency-Key` (Remember, Forget, ForgetMine and turns
do), so a retry never does the work twice. At most `retries` times, and never when the server
asks to wait longer than `max_wait` seconds: then the error is raised with its `retry_after`.
The `iter_*` methods follow `nextCursor` page by page.
"""

import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, cast
from urllib.parse import quote

import httpx

from openbot_memory_client.models import (
    ChangeOutput,
    ChannelInputRequest,
    ChannelOutput,
    ChatOutput,
    ConfessionOutput,
    ConfessionsOutput,
    EnrichmentOutput,
    EnrichmentsOutput,
    EntryOutput,
    ForgetMineOutput,
    ForgottenOutput,
    ItemOutput,
    ItemsOutput,
    LearningRunsOutput,
    MemoryBotInputRequest,
    MemoryBotOutput,
    MemoryListOutput,
    MemoryLogOutput,
    MemorySearchOutput,
    MySettingsOutput,
    OrganizationSettingsInputRequest,
    OrganizationSettingsOutput,
    PurgedOutput,
    RunOutput,
    TurnResult,
)

PAGE = 100

# The schema's operation ids and the method that calls each (the server's tests check that
# every operation of the live schema is here and that each method calls its operation).
OPERATIONS = {
    "memory_list": "memory",
    "memory_create": "remember, forget, forget_mine",
    "memory_retrieve": "entry",
    "memory_bot_settings": "memory_bot_settings",
    "memory_bot_settings_update": "memory_bot_settings_update",
    "memory_log": "memory_log",
    "memory_purge_create": "purge",
    "memory_search": "search",
    "chat_create": "chat_create",
    "chat_retrieve": "chat",
    "chat_confessions": "confessions",
    "chat_enrichments": "enrichments",
    "chat_items": "items",
    "chat_items_delete": "items_delete",
    "chat_learning": "learning_runs",
    "chat_turns": "turn",
    "me_export_retrieve": "my_export",
    "me_settings_retrieve": "my_settings",
    "me_settings_partial_update": "my_settings_update",
    "organization_channel_update": "channel_update",
    "organization_organization_settings": "organization_settings",
    "organization_organization_settings_update": "organization_settings_update",
}


class MemoryApiError(Exception):
    """An answer that is not a success: its status and the API's error body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.retry_after = retry_after


class MemoryClient:
    """A client for one server and one bearer token. Pass `http` to use an httpx client of your
    own (its settings are left as they are, and `close` leaves it open)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        max_wait: float = 30.0,
    ) -> None:
        if retries < 0 or max_wait < 0:
            raise ValueError("retries and max_wait must not be negative")
        self.owns_http = http is None
        self.http = http or httpx.Client(timeout=timeout)
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.retries = retries
        self.max_wait = max_wait

    def close(self) -> None:
        if self.owns_http:
            self.http.close()

    def __enter__(self) -> "MemoryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the transport ----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = False,
    ) -> Any:
        """The JSON the operation answers (None for 204); MemoryApiError otherwise."""
        headers = dict(self.headers)
        if idempotent:
            headers["Idempotency-Key"] = str(uuid.uuid4())
        query = {name: value for name, value in (params or {}).items() if value is not None}
        retried = (429, 503) if method == "GET" or idempotent else (429,)
        for attempt in range(self.retries + 1):
            response = self.http.request(
                method, self.base_url + path, params=query, json=body, headers=headers
            )
            wait = _retry_after(response) or 1
            if response.status_code not in retried or attempt == self.retries:
                break
            if wait > self.max_wait:
                break
            time.sleep(wait)
        if response.status_code >= 400:
            raise _error(response)
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise MemoryApiError(response.status_code, "bad_response", "not JSON") from None

    def _pages(self, path: str, key: str, page_size: int, **params: Any) -> Iterator[Any]:
        cursor = None
        while True:
            page = self._call("GET", path, params={**params, "limit": page_size, "cursor": cursor})
            yield from page[key]
            cursor = page.get("nextCursor")
            if cursor is None:
                return

    # --- memory ------------------------------------------------------------------------------

    def memory(
        self,
        bot_id: str,
        *,
        tags: list[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryListOutput:
        """The entries for you, the history included, in memory order (a page with `limit`)."""
        params = {"tags": ",".join(tags) if tags else None, "limit": limit, "cursor": cursor}
        return cast(
            MemoryListOutput, self._call("GET", f"/v1/bots/{_id(bot_id)}/memory", params=params)
        )

    def iter_memory(
        self, bot_id: str, *, tags: list[str] | None = None, page_size: int = PAGE
    ) -> Iterator[EntryOutput]:
        tagged = ",".join(tags) if tags else None
        return self._pages(f"/v1/bots/{_id(bot_id)}/memory", "entries", page_size, tags=tagged)

    def entry(self, bot_id: str, entry_id: str) -> EntryOutput:
        return cast(
            EntryOutput, self._call("GET", f"/v1/bots/{_id(bot_id)}/memory/{_id(entry_id)}")
        )

    def remember(
        self,
        bot_id: str,
        content: str,
        *,
        tags: list[str] | None = None,
        said_at: int | None = None,
    ) -> EntryOutput:
        """A pinned entry only you see; `said_at` in ms since the epoch if not now."""
        command: dict[str, Any] = {"_tag": "Remember", "content": content}
        if tags is not None:
            command["tags"] = tags
        if said_at is not None:
            command["saidAt"] = said_at
        return cast(EntryOutput, self._command(bot_id, command))

    def forget(self, bot_id: str, entry_id: str) -> ForgottenOutput:
        """Take back your part of an entry."""
        return cast(ForgottenOutput, self._command(bot_id, {"_tag": "Forget", "id": entry_id}))

    def forget_mine(self, bot_id: str) -> ForgetMineOutput:
        """Take back your part of every entry you are behind and may see."""
        return cast(ForgetMineOutput, self._command(bot_id, {"_tag": "ForgetMine"}))

    def _command(self, bot_id: str, command: dict[str, Any]) -> Any:
        path = f"/v1/bots/{_id(bot_id)}/memory"
        return self._call("POST", path, body={"command": command}, idempotent=True)

    def search(self, bot_id: str, q: str, *, limit: int | None = None) -> MemorySearchOutput:
        params = {"q": q, "limit": limit}
        path = f"/v1/bots/{_id(bot_id)}/memory/search"
        return cast(MemorySearchOutput, self._call("GET", path, params=params))

    def memory_log(
        self,
        bot_id: str,
        *,
        since: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryLogOutput:
        params = {"since": since, "limit": limit, "cursor": cursor}
        path = f"/v1/bots/{_id(bot_id)}/memory/log"
        return cast(MemoryLogOutput, self._call("GET", path, params=params))

    def iter_memory_log(
        self, bot_id: str, *, since: int | None = None, page_size: int = PAGE
    ) -> Iterator[ChangeOutput]:
        return self._pages(f"/v1/bots/{_id(bot_id)}/memory/log", "changes", page_size, since=since)

    def memory_bot_settings(self, bot_id: str) -> MemoryBotOutput:
        return cast(MemoryBotOutput, self._call("GET", f"/v1/bots/{_id(bot_id)}/memory/bot"))

    def memory_bot_settings_update(
        self, bot_id: str, settings: MemoryBotInputRequest
    ) -> MemoryBotOutput:
        path = f"/v1/bots/{_id(bot_id)}/memory/bot"
        return cast(MemoryBotOutput, self._call("PATCH", path, body=settings))

    def purge(self, bot_id: str, tag: str) -> PurgedOutput:
        path = f"/v1/bots/{_id(bot_id)}/memory/purge"
        return cast(PurgedOutput, self._call("POST", path, body={"tag": tag}))

    # --- chats -------------------------------------------------------------------------------

    def chat_create(
        self, bot_id: str, *, channel: str | None = None, test: bool = False
    ) -> ChatOutput:
        body = {"bot": bot_id, "channel": channel, "test": test}
        return cast(ChatOutput, self._call("POST", "/v1/chats", body=body))

    def chat(self, chat_id: str) -> ChatOutput:
        return cast(ChatOutput, self._call("GET", f"/v1/chats/{_id(chat_id)}"))

    def turn(self, chat_id: str, text: str) -> TurnResult:
        """Your words and the bot's answer; the turn always ends."""
        path = f"/v1/chats/{_id(chat_id)}/turns"
        return cast(TurnResult, self._call("POST", path, body={"text": text}, idempotent=True))

    def items(
        self, chat_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ItemsOutput:
        return cast(ItemsOutput, self._list(chat_id, "items", limit, cursor))

    def iter_items(self, chat_id: str, *, page_size: int = PAGE) -> Iterator[ItemOutput]:
        return self._pages(f"/v1/chats/{_id(chat_id)}/items", "items", page_size)

    def items_delete(self, chat_id: str) -> None:
        """Delete the chat's history (you own the chat); what was learned from it stays."""
        self._call("DELETE", f"/v1/chats/{_id(chat_id)}/items")

    def confessions(
        self, chat_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ConfessionsOutput:
        return cast(ConfessionsOutput, self._list(chat_id, "confessions", limit, cursor))

    def iter_confessions(
        self, chat_id: str, *, page_size: int = PAGE
    ) -> Iterator[ConfessionOutput]:
        return self._pages(f"/v1/chats/{_id(chat_id)}/confessions", "confessions", page_size)

    def enrichments(
        self, chat_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> EnrichmentsOutput:
        return cast(EnrichmentsOutput, self._list(chat_id, "enrichments", limit, cursor))

    def iter_enrichments(
        self, chat_id: str, *, page_size: int = PAGE
    ) -> Iterator[EnrichmentOutput]:
        return self._pages(f"/v1/chats/{_id(chat_id)}/enrichments", "enrichments", page_size)

    def learning_runs(
        self, chat_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> LearningRunsOutput:
        return cast(LearningRunsOutput, self._list(chat_id, "learning", limit, cursor))

    def iter_learning_runs(self, chat_id: str, *, page_size: int = PAGE) -> Iterator[RunOutput]:
        return self._pages(f"/v1/chats/{_id(chat_id)}/learning", "runs", page_size)

    def _list(self, chat_id: str, name: str, limit: int | None, cursor: str | None) -> Any:
        params = {"limit": limit, "cursor": cursor}
        return self._call("GET", f"/v1/chats/{_id(chat_id)}/{name}", params=params)

    # --- you and your organization -----------------------------------------------------------

    def my_export(self) -> dict[str, Any]:
        """Everything about you, as one JSON document (see the API's docs for its shape)."""
        return cast(dict[str, Any], self._call("GET", "/v1/me/export"))

    def my_settings(self) -> MySettingsOutput:
        return cast(MySettingsOutput, self._call("GET", "/v1/me/settings"))

    def my_settings_update(self, *, learn_from_me: bool) -> MySettingsOutput:
        body = {"learnFromMe": learn_from_me}
        return cast(MySettingsOutput, self._call("PATCH", "/v1/me/settings", body=body))

    def organization_settings(self, org_id: str) -> OrganizationSettingsOutput:
        path = f"/v1/organizations/{_id(org_id)}/settings"
        return cast(OrganizationSettingsOutput, self._call("GET", path))

    def organization_settings_update(
        self, org_id: str, settings: OrganizationSettingsInputRequest
    ) -> OrganizationSettingsOutput:
        path = f"/v1/organizations/{_id(org_id)}/settings"
        return cast(OrganizationSettingsOutput, self._call("PATCH", path, body=settings))

    def channel_update(
        self, org_id: str, channel_id: str, settings: ChannelInputRequest
    ) -> ChannelOutput:
        path = f"/v1/organizations/{_id(org_id)}/channels/{_id(channel_id)}"
        return cast(ChannelOutput, self._call("PATCH", path, body=settings))


def _id(value: str) -> str:
    """An id as one path segment: `/` and `..` in it name nothing else."""
    return quote(value, safe="")


def _retry_after(response: httpx.Response) -> int | None:
    raw = response.headers.get("Retry-After", "")
    return int(raw) if raw.isdigit() else None


def _error(response: httpx.Response) -> MemoryApiError:
    """The API's error shape `{"error": {"code", "message", "fields"?}}`, or what stands in
    for it when a proxy answered instead."""
    try:
        body = response.json()["error"]
        code, message, fields = body["code"], body["message"], body.get("fields")
    except (ValueError, KeyError, TypeError):
        code, message, fields = "http_error", response.reason_phrase, None
    return MemoryApiError(response.status_code, code, message, fields, _retry_after(response))
