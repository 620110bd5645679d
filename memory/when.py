"""[R8] The time a question names, as a window of UTC days, so that search can prefer what
was said in it: a day ("2026-05-08", "on 8 May 2026", "May 8, 2026", "am 8. Mai 2026",
"yesterday", "gestern", "3 days ago", "vor 3 Tagen"), a month ("in May 2026", "im Mai",
"last month", "letzten Monat"), a week ("last week", "letzte Woche", "this week"), a
year ("in 2025", "last year", "letztes Jahr"), or from any of these on ("since May",
"seit gestern": until today's end). A month without a year is its last one not after today. A
question that names no time — "when …" asks for one — has no window; the day each entry was
said is in what the model is shown instead. English and German, fixed patterns: no language
model.

The words that name the time are no clue to what was said in it: search matches the rest of
the question by terms and meaning, and lifts what was said within the window.

`only_asks` tells search an entry that asks and says nothing (it weighs such entries
down), with the same notion of a question's end."""

import re
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "january jan januar jänner",
            "february feb februar",
            "march mar märz maerz",
            "april apr",
            "may mai",
            "june jun juni",
            "july jul juli",
            "august aug",
            "september sep sept",
            "october oct oktober okt",
            "november nov",
            "december dec dezember dez",
        ),
        start=1,
    )
    for name in names.split()
}
_MONTH = "(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th|\.)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
# The word before a time, taken with it.
_BEFORE = r"\b(?:(?:in|im|on|am|during)\s+)"
# The words before a time that make it a start ("since May": `SINCE_BEFORE`); a month or a
# year alone is a time just after them too. The text is read with single spaces.
SINCE = ("since", "since the", "seit", "seit dem", "seit den")
_AFTER_SINCE = "|".join(rf"(?<=\b{words} )" for words in SINCE)
ISO_DAY = re.compile(_BEFORE + r"?\b" + _YEAR + r"-(?P<month>\d{2})-(?P<day>\d{2})\b")
DAY_MONTH_YEAR = re.compile(
    _BEFORE + r"?\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b"
)
MONTH_DAY_YEAR = re.compile(_BEFORE + r"?\b" + _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR + r"\b")
MONTH_YEAR = re.compile(_BEFORE + r"?\b" + _MONTH + r",?\s+" + _YEAR + r"\b")
# "may" is also a verb: a month alone counts only after a word such as "in" or "since", and
# not as someone's name ("on Jan's birthday").
MONTH_ALONE = re.compile(r"(?:" + _BEFORE + "|" + _AFTER_SINCE + ")" + _MONTH + r"(?!\w|['’]s\b)")
YEAR_ALONE = re.compile(r"(?:" + _BEFORE + "|" + _AFTER_SINCE + r"|\bjahr\s+)" + _YEAR + r"\b")
DAYS_AGO = re.compile(r"\b(\d{1,3}|a|one|two|three|ein|einem|zwei|drei)\s+days?\s+ago\b")
VOR_TAGEN = re.compile(r"\bvor\s+(\d{1,3}|einem|zwei|drei)\s+tag(?:en)?\b")
NUMBERS = {"a": 1, "one": 1, "ein": 1, "einem": 1, "two": 2, "zwei": 2, "three": 3, "drei": 3}
_LAST = r"\b(last|previous)\s+"
_LETZTE = r"\b(letzte|vorige|vergangene)[nms]?\s+"
RELATIVE = (
    (re.compile(r"\b(today|heute)\b"), "day", 0),
    (re.compile(r"\b(yesterday|gestern)\b"), "day", -1),
    (re.compile(r"\bvorgestern\b"), "day", -2),
    (re.compile(_LAST + r"week\b|" + _LETZTE + r"woche\b"), "week", -1),
    (re.compile(r"\bthis\s+week\b|\bdiese\s+woche\b"), "week", 0),
    (re.compile(_LAST + r"month\b|" + _LETZTE + r"monat\b"), "month", -1),
    (re.compile(r"\bthis\s+month\b|\bdiese[nm]?\s+monat\b"), "month", 0),
    (re.compile(_LAST + r"year\b|" + _LETZTE + r"jahr\b"), "year", -1),
    (re.compile(r"\bthis\s+year\b|\bdieses\s+jahr\b"), "year", 0),
)

SINCE_BEFORE = re.compile(r"\b(?:" + "|".join(SINCE) + r") $")

Window = tuple[int, int]
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class NamedTime(NamedTuple):
    window: Window
    # The question, case-folded, without the words that name the time.
    rest: str


# A question: it ends with "?" or opens with a question word or a request to find.
ASKS = re.compile(
    r"\?\s*$|^\s*(what|when|where|who|whom|which|why|how|did|do|does|was|were|is|are|have|has"
    r"|can|could|tell|show|list|find|remind|was|wann|wo|wer|wen|welche[rsnm]?|warum|wie|hat"
    r"|habe|hast|haben|ist|sind|war|waren|zeig|sag|finde|erinnere)\b",
    re.IGNORECASE,
)


def asks(text: str) -> bool:
    """Whether `text` is a question (or asks to be shown something), not a statement: "I move
    in May." names a time without asking about it."""
    return ASKS.search(text) is not None


def only_asks(text: str) -> bool:
    """Whether every sentence of `text` asks something (ends with "?"): a stored line that
    says nothing ("How is your family doing?"), not one that says something and asks back
    ("I'm back from Paris! Have you been?")."""
    return all(sentence.endswith("?") for sentence in SENTENCE_END.split(text.strip()))


def time_named(query: str, now_ms: int) -> NamedTime | None:
    """The [start, end) in ms of the days `query` names and the rest of it, or None (see the
    module)."""
    text = " ".join(query.casefold().split())
    today = datetime.fromtimestamp(now_ms / 1000, UTC).date()
    try:
        named = _window(text, today)
    except ValueError:  # a day that does not exist: "31 June 2026"
        return None
    if named is None:
        return None
    window, found = named
    start = found.start()
    if since := SINCE_BEFORE.search(text[:start]):
        window, start = _until_today(window, today), since.start()
    rest = " ".join(f"{text[:start]} {text[found.end() :]}".split())
    return NamedTime(window, re.sub(r" (?=[?.!,;:]|$)", "", rest))


def _window(text: str, today: date) -> tuple[Window, re.Match[str]] | None:
    for pattern in (ISO_DAY, DAY_MONTH_YEAR, MONTH_DAY_YEAR, MONTH_YEAR, MONTH_ALONE, YEAR_ALONE):
        if found := pattern.search(text):
            parts = {key: part for key, part in found.groupdict().items() if part}
            return _named(parts, today), found
    if found := DAYS_AGO.search(text) or VOR_TAGEN.search(text):
        count = found.group(1)
        ago = int(count) if count.isdigit() else NUMBERS[count]
        # A day either side: "3 days ago" is seldom counted exactly.
        return _days(today - timedelta(days=ago + 1), 3), found
    for pattern, unit, offset in RELATIVE:
        if found := pattern.search(text):
            return _relative(today, unit, offset), found
    return None


def _named(parts: dict[str, str], today: date) -> Window:
    """The window of a day, a month or a year named by its parts (a month alone: its last
    one not after today)."""
    if "month" not in parts:
        return _year(int(parts["year"]))
    month = MONTHS.get(parts["month"]) or int(parts["month"])  # a name, or ISO's digits
    if "year" not in parts:
        return _month(today.year if month <= today.month else today.year - 1, month)
    if "day" not in parts:
        return _month(int(parts["year"]), month)
    return _days(date(int(parts["year"]), month, int(parts["day"])), 1)


def _until_today(window: Window, today: date) -> Window:
    """From the start of `window` to the end of today ("since May")."""
    return window[0], max(window[1], _ms(today + timedelta(days=1)))


def _relative(today: date, unit: str, offset: int) -> Window:
    if unit == "day":
        return _days(today + timedelta(days=offset), 1)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=offset)
        return _days(monday, 7)
    if unit == "month":
        month = today.month + offset
        return _month(today.year + (month - 1) // 12, (month - 1) % 12 + 1)
    return _year(today.year + offset)


def _ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _days(first: date, count: int) -> Window:
    return _ms(first), _ms(first + timedelta(days=count))


def _month(year: int, month: int) -> Window:
    following = date(year + month // 12, month % 12 + 1, 1)
    return _ms(date(year, month, 1)), _ms(following)


def _year(year: int) -> Window:
    return _ms(date(year, 1, 1)), _ms(date(year + 1, 1, 1))
