"""What the memory routes answer: one output serializer per body, over the
rows the selectors read, so the schema shows exactly what a client receives."""

from typing import Any

from rest_framework import serializers

from memory.models import Change, Entry
from openbot.paging import PageOutput


def source_body(source: dict[str, Any]) -> dict[str, str]:
    """`{"entry"}` for an entry, `{"chat", "item"}` for an item of a chat."""
    if source["source_entry_id"] is not None:
        return {"entry": source["source_entry_id"]}
    return {"chat": source["chat_id"], "item": f"i-{source['item_seq']}"}


class SourceOutput(serializers.Serializer):
    """An item of a chat (`chat` and `item`) or another entry (`entry`)."""

    chat = serializers.CharField(required=False)
    item = serializers.CharField(required=False)
    entry = serializers.CharField(required=False)

    def to_representation(self, instance: Any) -> dict[str, str]:
        return source_body(instance)


class EntryOutput(serializers.Serializer):
    """[E4] An entry; `invalidatedAt` only once invalidated, `confidence` only on an
    observation.

    The fields say what a client gets (and the schema shows them); `to_representation` writes
    it straight from the row, as DRF's field-by-field walk is slow for a long listing.
    A test holds the two to the same output."""

    id = serializers.CharField()
    layer = serializers.ChoiceField(Entry.Layer.choices)
    content = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    sources = SourceOutput(many=True)
    status = serializers.ChoiceField(Entry.Status.choices)
    createdAt = serializers.IntegerField(source="created_at")
    updatedAt = serializers.IntegerField(source="updated_at")
    invalidatedAt = serializers.IntegerField(source="invalidated_at", required=False)
    saidAt = serializers.IntegerField(
        source="said_at",
        help_text="When it was said (ms): for a fact learned in a chat, its first source item's "
        "time; else the time given to Remember, or the time it was stored",
    )
    confidence = serializers.FloatField(required=False)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        body = {
            "id": instance["id"],
            "layer": instance["layer"],
            "content": instance["content"],
            "tags": instance["tags"],
            "sources": [source_body(source) for source in instance["sources"]],
            "status": instance["status"],
            "createdAt": instance["created_at"],
            "updatedAt": instance["updated_at"],
            "saidAt": instance["said_at"],
        }
        if instance["invalidated_at"] is not None:
            body["invalidatedAt"] = instance["invalidated_at"]
        if instance["layer"] == Entry.Layer.OBSERVATION:
            body["confidence"] = instance["confidence"]
        return body


class VersionedPageOutput(PageOutput):
    """A page with the pool's `version`."""

    version = serializers.IntegerField()


class MemoryListOutput(VersionedPageOutput):
    """The entries for you, in memory order."""

    entries = EntryOutput(many=True)


class ScoredEntryOutput(EntryOutput):
    """An entry that matched a search, with its relevance."""

    score = serializers.FloatField(help_text="BM25 relevance [R1]; higher is more relevant")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return super().to_representation(instance) | {"score": instance["score"]}


class MemorySearchOutput(serializers.Serializer):
    """The matching entries for you, most relevant first, and the pool's version."""

    entries = ScoredEntryOutput(many=True)
    version = serializers.IntegerField()


class ChangeOutput(serializers.Serializer):
    """A change of the log with the ids of it the reader may see now."""

    version = serializers.IntegerField()
    at = serializers.IntegerField()
    by = serializers.ChoiceField(Change.By.choices)
    ids = serializers.ListField(child=serializers.CharField())


class MemoryLogOutput(VersionedPageOutput):
    """Changes of entries you may see now."""

    changes = ChangeOutput(many=True)


class ForgottenOutput(serializers.Serializer):
    """Forget took back your part."""

    ok = serializers.BooleanField()


class ForgetMineOutput(serializers.Serializer):
    """ForgetMine took back your part of every entry you are behind and may see."""

    retracted = serializers.IntegerField(help_text="Entries retracted: you alone were behind them")
    excluded = serializers.IntegerField(
        help_text="Entries that stay for the others and are no longer for you"
    )
    version = serializers.IntegerField(
        help_text="The pool's version after the change (unchanged if there was nothing to forget)"
    )


class PurgedOutput(serializers.Serializer):
    """How many entries a purge removed, and nothing else."""

    removed = serializers.IntegerField()
