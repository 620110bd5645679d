"""[K5, K6] What a learned note may hold and when two notes say the same thing.

- `instruction_like`: content that addresses the assistant with instructions rather than
  stating something about people — overriding what it was told ("ignore previous
  instructions", "ignoriere alle vorherigen Anweisungen"), standing orders ("from now on,
  always …", "ab jetzt immer …"), asking for its instructions ("reveal your system prompt"),
  chat role markers ("system:", "assistant:") and chat-template tokens. Learning refuses it.
  A fixed list of English and German patterns: it catches the common forms, not every
  way of saying it; what it misses is still replayed only as a quoted note.
- `content_key`: the normalized content (case folded, punctuation and spacing dropped, the
  English contractions of person forms spelled out: "I'm" is "i am") as HMAC-SHA256 under the
  index key, with the pool's id, cut to 128 bits. Stored in the entry's plain row so learning
  finds an equal note without decrypting the pool. It reveals equality only: which
  entries of one pool say the same after normalization (not across pools); with the index key
  someone could confirm a guessed content, as with the search index's terms.
"""

import hashlib
import hmac
import re
import unicodedata

from memory.terms import index_key

# Each pattern is searched in the case-folded text.
_INSTRUCTIONS = tuple(
    re.compile(pattern)
    for pattern in (
        # Overriding what the assistant was told.
        r"\b(ignore|disregard|forget|override)\b[^.!?\n]{0,40}"
        r"\b(instructions?|prompts?|guidelines|(previous|prior|earlier|above|your) rules)\b",
        r"\b(ignore|disregard|forget)\s+(everything|all|anything)\b[^.!?\n]{0,30}"
        r"\b(told|said|above|before|previous|earlier)\b",
        r"\b(ignorier\w*|vergiss|missacht\w*|überschreib\w*)\b[^.!?\n]{0,40}"
        r"\b(anweisung\w*|instruktion\w*|prompts?|vorgaben|(vorherigen|bisherigen|deine) regeln)",
        # Standing orders: "from now on, (you) always …", not "from now on I …".
        r"\b(from now on|starting now|henceforth|going forward),?\s+(please\s+)?(you\s+)?"
        r"(always|never|only|must|should|answer|respond|reply|speak|write|talk|say|use|act|"
        r"behave|pretend|call|address|refer|ignore|reveal|be)\b",
        r"\b(ab jetzt|ab sofort|von nun an|künftig|in zukunft),?\s+(bitte\s+)?"
        r"(immer|nie|niemals|nur|musst|sollst|du|antworte\w*|sprich|schreib\w*|rede\w*|"
        r"verhalte\w*|sag\w*|nenn\w*|benutze?\w*|ignorier\w*|verrat\w*)\b",
        r"(^|[.!?\n]\s*)(please\s+)?(always|never|only)\s+(answer|respond|reply|speak|write|"
        r"talk|say|use|call|refer|address)\b",
        r"(^|[.!?\n]\s*)(bitte\s+)?(antworte|sprich|schreib|rede)\w*\b[^.!?\n]{0,40}"
        r"\b(immer|nur noch|ab jetzt|von nun an)\b",
        # Asking for the assistant's own instructions.
        r"\b(reveal|show|print|repeat|output|tell|give|share|display|leak|dump)\b[^.!?\n]{0,30}"
        r"\b(system ?prompt|system message|(your|initial|hidden|original) (instructions|prompt|"
        r"rules|guidelines))",
        r"\b(verrat\w*|zeig\w*|nenn\w*|gib|wiederhol\w*|ausgeben|gib aus)\b[^.!?\n]{0,30}"
        r"(system-?prompt|systemnachricht|deine (anweisungen|instruktionen|regeln|vorgaben))",
        # Taking on another part.
        r"\byou are now\b|\bdu bist (jetzt|ab jetzt|nun|ab sofort)\b",
        r"(^|[.!?\n]\s*)(act as|pretend (to be|you are)|roleplay as|tu so,? als)\b",
        r"\b(new|updated|additional) instructions?\s*:|\bneue anweisung\w*\s*:",
        # Chat role markers and chat-template tokens.
        r"(^|[.!?\n]\s*)(system|assistant|assistent|developer|entwickler)\s*:",
        r"<\|[a-z_]+\|>|\[/?inst\]|<<\s*/?sys\s*>>|</?(system|assistant)>",
    )
)


def instruction_like(text: str) -> bool:
    """Whether `text` addresses the assistant with instructions (see the module)."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    return any(pattern.search(folded) for pattern in _INSTRUCTIONS)


# English contractions of person forms, spelled out before punctuation is dropped.
_CONTRACTIONS = (
    (re.compile(r"\b(i)'m\b"), r"\1 am"),
    (re.compile(r"\b(you|we|they)'re\b"), r"\1 are"),
    (re.compile(r"\b(he|she|it)'s\b"), r"\1 is"),
    (re.compile(r"\b(i|you|we|they)'ve\b"), r"\1 have"),
    (re.compile(r"\b(i|you|we|they|he|she)'ll\b"), r"\1 will"),
    (re.compile(r"\b(can)'t\b"), r"\1 not"),
    (re.compile(r"\b(\w+)n't\b"), r"\1 not"),
)
_NOT_A_WORD = re.compile(r"[\W_]+")


def normalized(text: str) -> str:
    """`text` as compared for equality: case folded, person forms spelled out, words only,
    single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    for contraction, spelled in _CONTRACTIONS:
        folded = contraction.sub(spelled, folded)
    return " ".join(_NOT_A_WORD.sub(" ", folded).split())


def content_key(*, pool_id: str, content: str) -> str:
    """The stored key of `content` in `pool_id`'s pool (see the module)."""
    message = f"content\0{pool_id}\0{normalized(content)}".encode()
    return hmac.new(index_key(), message, hashlib.sha256).hexdigest()[:32]
