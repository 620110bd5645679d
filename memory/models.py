"""The memory pool of a bot: entries, tags, sources, evidence, exclusions, versions [E1–E7].

What the access rule reads is plain, indexed metadata (tags, source references, evidence,
exclusions, the derived `Closure`/`sound`, and what an entry's own row holds of its sources,
`org:` tags and evidence); content is encrypted and read only for the entries a response
returns.

The rows that hang on an entry (its tags, sources, evidence, exclusions, terms and closure)
have no foreign-key constraint in the database: `memory.graph.entries_delete` deletes them with
their entry, and Django's cascade does elsewhere. A purge deletes a thousand entries under the
pool's lock, and the database's check of every such constraint for every deleted entry at
commit was a third of that hold.
"""

from django.db import models

from openbot import ids
from openbot.fields import EncryptedTextField
from openbot.models import Bot


def entry_id() -> str:
    return ids.new_id("mem")


# An `Entry.org_scope` or `rule_scope` of several values: no id or rule is "*".
SCOPE_MANY = "*"


class Pool(models.Model):
    """One per bot that is not linked: the pool version and memory-bot settings."""

    class Period(models.TextChoices):
        DAY = "day"
        MONTH = "month"

    class Recall(models.TextChoices):
        RECENT = "recent"
        RELEVANT = "relevant"

    bot = models.OneToOneField(Bot, primary_key=True, on_delete=models.CASCADE)
    version = models.BigIntegerField(default=0)
    settings_version = models.IntegerField(default=0)
    instructions = models.TextField(blank=True, default="")
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    budget_period = models.CharField(max_length=5, choices=Period.choices, null=True, blank=True)
    budget_limit_micros = models.BigIntegerField(null=True, blank=True)
    # What enrichment offers the model: the newest entries, or those that match the
    # person's input.
    recall = models.CharField(max_length=8, choices=Recall.choices, default=Recall.RECENT)

    def __str__(self) -> str:
        return f"pool of {self.bot_id} v{self.version}"


class Entry(models.Model):
    class Layer(models.TextChoices):
        FACT = "fact"
        OBSERVATION = "observation"
        PINNED = "pinned"

    class Status(models.TextChoices):
        ACTIVE = "active"
        INVALIDATED = "invalidated"
        RETRACTED = "retracted"

    id = models.CharField(primary_key=True, max_length=40, default=entry_id)
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+")
    layer = models.CharField(max_length=12, choices=Layer.choices)
    content = EncryptedTextField()
    # The plain-text length, so `context` knows what fits without decrypting.
    content_length = models.IntegerField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.BigIntegerField()
    updated_at = models.BigIntegerField()
    invalidated_at = models.BigIntegerField(null=True, blank=True)
    # [R8] When it was said: its first source item's time for a fact learned from a chat, the
    # time a person gave (or the time it was stored) otherwise.
    said_at = models.BigIntegerField()
    confidence = models.FloatField(null=True, blank=True)
    # 0 for pinned, 1 otherwise: memory order is (rank, updatedAt desc, id).
    rank = models.SmallIntegerField()
    # Derived on write by memory.graph: the entry's own part of soundness — it
    # carries evidence, every source entry it names exists in the pool, it is on no cycle.
    intact = models.BooleanField(default=False)
    # Derived on write by memory.graph: how many entries of its `Closure` keep it from being
    # sound — itself if not intact; another entry if not intact or not active. A status
    # change moves the count of its dependents by one, in one set-based update.
    blockers = models.IntegerField(default=1)
    # Derived on write: `blockers == 0` — every reachable source exists, is active, carries
    # evidence, and no cycle is reachable.
    sound = models.BooleanField(default=False)
    # What the access rule reads in the entry's own row, written with the
    # entry (`memory.services.row_access`; none of it changes after): whether it names a source
    # entry (if not, its `Closure` is itself alone); the one organization its `org:` tags name;
    # its one evidence rule as "<organization> <rule>". '' for none, `SCOPE_MANY` for several.
    # The defaults (in the database too, for writers that do not know the columns) make the
    # rule read the closure, tags and evidence themselves, as it does for `SCOPE_MANY`.
    depends = models.BooleanField(default=True, db_default=True)
    org_scope = models.CharField(max_length=200, default=SCOPE_MANY, db_default=SCOPE_MANY)
    rule_scope = models.CharField(max_length=120, default=SCOPE_MANY, db_default=SCOPE_MANY)
    # The keyed hash of the normalized content (`memory.notes.content_key`): learning
    # finds an equal note without decrypting; '' for entries written before it (`manage.py
    # reindex` fills it in).
    content_key = models.CharField(max_length=32, blank=True, default="", db_default="")

    class Meta:
        verbose_name_plural = "entries"
        indexes = [
            # Reads start from the entries whose `for:` tag admits the reader and order
            # those; this index serves that step index-only (the memory order key and what
            # the access rule filters on). There is deliberately no index that walks a whole
            # pool in memory order: the planner would walk it past entries the reader may not
            # see, and the cost would grow with the pool.
            models.Index(
                fields=["id", "bot", "sound", "status", "rank", "updated_at", "content_length"],
                name="entry_admitted_order",
            ),
            # Learning looks up an equal note by its key.
            models.Index(fields=["content_key"], name="entry_by_content_key"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.layer}, {self.status})"


class EntryTag(models.Model):
    """One tag of an entry; `kind` is the part before the first colon, or `topic`."""

    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, related_name="tag_rows", db_constraint=False
    )
    # Indexed by `tag_by_pool`. An index on the pool alone would be redundant, and SQLite,
    # without statistics, took it for an entry's admitting tag: every tag row of the pool read
    # for every entry listed.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    tag = models.CharField(max_length=200)
    kind = models.CharField(max_length=10)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "tag"], name="one_tag_per_entry")]
        indexes = [
            models.Index(fields=["bot", "tag"], name="tag_by_pool"),
            # The access rule asks an entry's tags by kind (`org:`, `for:`), index-only.
            models.Index(fields=["entry", "kind", "tag"], name="tag_by_entry_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} {self.tag}"


class EntrySource(models.Model):
    """[E2] A source: an item (`chat_id`, `item_seq`) for a fact, an entry for an observation.

    `source_entry_id` is not a foreign key: a source may be missing (purged, or never imported),
    which hides the entry.
    """

    # Indexed by `source_by_entry`.
    entry = models.ForeignKey(
        Entry,
        on_delete=models.CASCADE,
        related_name="source_rows",
        db_index=False,
        db_constraint=False,
    )
    position = models.SmallIntegerField()
    chat_id = models.CharField(max_length=40, null=True, blank=True)
    item_seq = models.IntegerField(null=True, blank=True)
    source_entry_id = models.CharField(max_length=40, null=True, blank=True, db_index=True)

    class Meta:
        indexes = [
            # The sources of the entries in a response, read index-only.
            models.Index(
                fields=["entry", "position", "chat_id", "item_seq", "source_entry_id"],
                name="source_by_entry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} <- {self.source_entry_id or f'{self.chat_id}/i-{self.item_seq}'}"


class Evidence(models.Model):
    """[V3] The access rule of one source item (or a pinned entry's author), stored privately."""

    # Indexed by `evidence_by_entry`.
    entry = models.ForeignKey(
        Entry,
        on_delete=models.CASCADE,
        related_name="evidence_rows",
        db_index=False,
        db_constraint=False,
    )
    # `person:<u>` or `channel:<c>`.
    rule = models.CharField(max_length=60)
    organization_id = models.CharField(max_length=40)
    chat_id = models.CharField(max_length=40, null=True, blank=True)
    item_seq = models.IntegerField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "evidence"
        constraints = [
            # One access rule per source item of an entry. (That runs never apply the
            # same item twice is kept by the chat's read position, locked at apply.)
            models.UniqueConstraint(
                fields=["entry", "chat_id", "item_seq"], name="one_evidence_per_item"
            )
        ]
        indexes = [
            # The access rule reads an entry's rules and organizations index-only.
            models.Index(fields=["entry", "organization_id", "rule"], name="evidence_by_entry"),
        ]

    def __str__(self) -> str:
        return f"evidence {self.pk} of {self.entry_id}"


class Closure(models.Model):
    """Derived: `entry` depends on `ancestor` (itself included), through source references."""

    # Derived rows, written by memory.graph with their entry. A deep entry has a row
    # per ancestor: a constraint's check of each at commit would double what writing them
    # holds the lock for. Indexed by `one_closure_row`, which leads with the entry.
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    ancestor_id = models.CharField(max_length=40, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "ancestor_id"], name="one_closure_row")
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} depends on {self.ancestor_id}"


class Exclusion(models.Model):
    """A person who took back their part of an entry; kept private."""

    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    person_id = models.CharField(max_length=40)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "person_id"], name="one_exclusion")]

    def __str__(self) -> str:
        return f"exclusion {self.pk} on {self.entry_id}"


class Change(models.Model):
    """[E7] One committed change of a pool: its version, who, and an encrypted payload."""

    class By(models.TextChoices):
        MEMORY_BOT = "memory_bot"
        PERSON = "person"
        PROMOTION = "promotion"

    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+")
    version = models.BigIntegerField()
    at = models.BigIntegerField()
    by = models.CharField(max_length=12, choices=By.choices)
    payload = EncryptedTextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "version"], name="one_change_per_version")
        ]

    def __str__(self) -> str:
        return f"change v{self.version} of {self.bot_id} by {self.by}"


class ChangeEntry(models.Model):
    """An entry a change touched, indexed so the log and purge find changes by entry."""

    change = models.ForeignKey(Change, on_delete=models.CASCADE, related_name="entry_rows")
    entry_id = models.CharField(max_length=40, db_index=True)

    class Meta:
        verbose_name_plural = "change entries"

    def __str__(self) -> str:
        return f"change {self.change_id} touched {self.entry_id}"


class EntryTerm(models.Model):
    """One term of an entry's content, as a keyed hash (memory.terms), with what BM25
    needs: how often the term occurs in the entry and the entry's length in terms. Written
    with the entry, deleted with it by the cascade."""

    # Indexed by `one_term_per_entry`, which leads with the entry.
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+")
    term = models.CharField(max_length=32)
    frequency = models.IntegerField()
    length = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "term"], name="one_term_per_entry")]
        indexes = [
            # Search starts from the entries that hold a query term, index-only.
            models.Index(
                fields=["bot", "term", "entry", "frequency", "length"], name="term_by_bot"
            ),
        ]

    def __str__(self) -> str:
        return f"term of {self.entry_id}"


class PoolTerm(models.Model):
    """How many of a pool's entries hold a term (a keyed hash, as in EntryTerm): what BM25
    reads to choose how to read the query's term rows, without reading them
    (memory.relevance.ranked). Kept with the term rows by memory.index; a count that had
    drifted would only choose the slower way, never change what is found."""

    # Indexed by `one_count_per_pool_term`, which leads with the pool.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    term = models.CharField(max_length=32)
    entries = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "term"], name="one_count_per_pool_term")
        ]

    def __str__(self) -> str:
        return f"term count of {self.bot_id}"


class EntryVector(models.Model):
    """The meaning of an entry's content (memory.meaning), encrypted like content: a
    vector can be inverted to approximate its text. Written by the worker after the entry
    (memory.vectors), deleted with the entry's other rows by every purge."""

    entry = models.OneToOneField(
        Entry, on_delete=models.CASCADE, primary_key=True, related_name="+", db_constraint=False
    )
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    vector = EncryptedTextField()

    def __str__(self) -> str:
        return f"vector of {self.entry_id}"
