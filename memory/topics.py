"""[E3, E9] What a topic is — the one rule, for Remember, learning and the schemas alike.

A topic is a tag without a colon, as the source words it: lowercase letters of any script,
digits and hyphens, in NFC, at most `TOPIC_MAX_LENGTH` characters. A letter is lowercase
(`Ll`), a modifier letter (`Lm`) or a letter of a script without case (`Lo`: "料理"); an
uppercase or titlecase letter is refused, not folded, as topics are lowercase. A combining mark
(`Mn`, `Mc`) may follow a letter or a digit, so that scripts written with them ("खाना") are
topics too. A digit is a decimal digit of any script (`Nd`). Hyphens join parts; a leading,
trailing or doubled hyphen is refused.

No Django here: the schemathesis hooks of CI generate topics with this rule.
"""

import unicodedata
from collections.abc import Sequence

TOPIC_MAX_LENGTH = 64
_STARTS = frozenset({"Ll", "Lm", "Lo", "Nd"})
_WITHIN = _STARTS | {"Mn", "Mc"}

# The shape of a topic for schemas (the OpenAPI schema, the JSON Schema a learning step
# asks the model for): exactly the rule over ASCII (a-z, 0-9, single inner hyphens), and any
# character beyond ASCII, whose category `topic_of` decides. It stays this simple because
# llama.cpp turns it into a grammar for constrained decoding: a negated class with `\x`
# escapes reads the same there, in ECMA (astral characters too, without the `u` flag) and in
# Python, where `\s`, `\p{…}` or a table of every lowercase letter would not.
_TOPIC_CHARACTER = r"[^\x00-\x2f\x3a-\x60\x7b-\x7f]"
TOPIC_SHAPE = rf"^{_TOPIC_CHARACTER}+(-{_TOPIC_CHARACTER}+)*$"
# The topics a learning answer may hold, for constrained decoding: llama.cpp builds the grammar
# of a string from its `pattern` alone, without `maxLength`, so this pattern bounds a topic
# itself (three parts of at most 20 characters), or a small model may write one until its
# tokens run out. `topic_of` still decides what is stored.
TOPIC_SHAPE_BOUNDED = rf"^{_TOPIC_CHARACTER}{{1,20}}(-{_TOPIC_CHARACTER}{{1,20}}){{0,2}}$"


def topic_of(tag: object) -> str | None:
    """`tag` as a topic in NFC, or None if it is not one."""
    if not isinstance(tag, str) or len(tag) > 4 * TOPIC_MAX_LENGTH:
        return None
    topic = unicodedata.normalize("NFC", tag)
    if len(topic) > TOPIC_MAX_LENGTH:
        return None
    for part in topic.split("-"):
        if not part or unicodedata.category(part[0]) not in _STARTS:
            return None
        if any(unicodedata.category(character) not in _WITHIN for character in part[1:]):
            return None
    return topic


def topics_of(tags: Sequence[object]) -> list[str] | None:
    """`tags` as topics in NFC without repeats, in order; None if one is not a topic."""
    topics = [topic_of(tag) for tag in tags]
    if any(topic is None for topic in topics):
        return None
    return list(dict.fromkeys(topic for topic in topics if topic is not None))
