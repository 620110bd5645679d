"""[R2] Terms of a text, and their keyed hashes: what the search index stores instead of words.

Normalization follows what Snowball-based analyzers do (Lucene's, Tantivy's): Unicode case
folding, NFKD with the combining marks dropped (so "Fahrräder" and "fahrrader" meet), a split
on everything that is not a letter or digit, a small English and German stop-word list, and
the Snowball stemmer of the text's language. A text is German when it holds more German than
English stop words, else English; a query is stemmed both ways, so a question in either
language meets entries in both.

A term is stored as HMAC-SHA256 under the index key (`OPENBOT_INDEX_KEY`, or derived from the
first key of `OPENBOT_ENCRYPTION_KEYS`), cut to 128 bits: the index holds no word, only which
entries share a term, how often and how long each entry is (see docs/api.md, Search).
"""

import hashlib
import hmac
import re
import threading
import unicodedata
from collections import Counter
from functools import cache
from typing import Any

import snowballstemmer
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

# Letters and digits; "_" is punctuation here.
WORD = re.compile(r"[^\W_]+")
# A term longer than this is not a word anyone asks for (a token, a hash): left out.
MAX_TERM = 40

# A small list each, as Snowball publishes them (shortened): words that tell entries apart
# by nothing.
ENGLISH_STOP_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
"""
GERMAN_STOP_TEXT = """
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes
auch auf aus bei bin bis bist da damit dann das dass dein deine dem den denn der des dich die
dies diese diesem diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines
er es etwas euch euer eure für gegen gewesen hab habe haben hat hatte hatten hier hin hinter
ich ihm ihn ihnen ihr ihre im in indem ins ist jede jedem jeden jeder jedes jene jetzt kann
kein keine können machen man manche mein meine mich mir mit muss musste nach nicht nichts noch
nun nur ob oder ohne sehr sein seine sich sie sind so solche soll sondern sonst über um und uns
unser unter viel vom von vor war waren warst was weg weil weiter welche wenn werde werden wie
wieder will wir wird wirst wo wollen zu zum zur zwar zwischen
"""


def _fold(text: str) -> str:
    """Case folding and accent folding: casefold, NFKD, combining marks dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


ENGLISH_STOP_FOLDED = frozenset(_fold(word) for word in ENGLISH_STOP_TEXT.split())
GERMAN_STOP_FOLDED = frozenset(_fold(word) for word in GERMAN_STOP_TEXT.split())
STOP_WORDS = ENGLISH_STOP_FOLDED | GERMAN_STOP_FOLDED


# A Snowball stemmer keeps the word it works on in itself: one per thread and language.
_stemmers = threading.local()


def _stemmer(language: str) -> Any:
    found = getattr(_stemmers, language, None)
    if found is None:
        found = snowballstemmer.stemmer(language)
        setattr(_stemmers, language, found)
    return found


def _words(text: str) -> list[str]:
    return [word for word in WORD.findall(_fold(text)) if len(word) <= MAX_TERM]


def _language(words: list[str]) -> str:
    german = sum(word in GERMAN_STOP_FOLDED for word in words)
    english = sum(word in ENGLISH_STOP_FOLDED for word in words)
    return "german" if german > english else "english"


def _stems(words: list[str], language: str) -> list[str]:
    return list(_stemmer(language).stemWords(words))


def text_terms(text: str) -> Counter[str]:
    """The terms of an entry's content and how often each occurs."""
    words = _words(text)
    kept = [word for word in words if word not in STOP_WORDS]
    return Counter(_stems(kept, _language(words)))


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, stemmed as English and as German, in order."""
    kept = [word for word in _words(text) if word not in STOP_WORDS]
    return list(dict.fromkeys(_stems(kept, "english") + _stems(kept, "german")))


def query_words(text: str) -> int:
    """How many words a query has, before stop words are dropped (what its limit counts)."""
    return len(_words(text))


@cache
def index_key() -> bytes:
    """The index key: `OPENBOT_INDEX_KEY`, else derived (HKDF-SHA256) from the first
    encryption key, so that it is never one of the keys that encrypt content."""
    configured = getattr(settings, "OPENBOT_INDEX_KEY", None)
    if configured:
        if len(configured) < 32:
            raise ImproperlyConfigured("OPENBOT_INDEX_KEY must be at least 32 characters [R2]")
        return str(configured).encode()
    keys = settings.OPENBOT_ENCRYPTION_KEYS
    if not keys:
        raise ImproperlyConfigured("OPENBOT_ENCRYPTION_KEYS is empty [X1]")
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"openbot term index [R2]"
    ).derive(str(keys[0]).encode())


def _forget_key(*, setting: str, **kwargs: object) -> None:
    if setting in ("OPENBOT_INDEX_KEY", "OPENBOT_ENCRYPTION_KEYS"):
        index_key.cache_clear()


setting_changed.connect(_forget_key)


def term_hash(term: str) -> str:
    """The stored form of a term: HMAC-SHA256 under the index key, 128 bits in hex."""
    return hmac.new(index_key(), term.encode(), hashlib.sha256).hexdigest()[:32]
