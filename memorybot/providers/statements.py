"""[K4] What the offline learner keeps: statements, not messages.

A deterministic baseline, not a language model: it reads fixed English and German word lists
and patterns and understands nothing. Only a person's items are read (bot messages, tool
results and notices give nothing), each on its own:

1. The text is cut into sentences (after ".", "!", "?" or "…" and a space, at line breaks),
   and a sentence into clauses where a new one opens: after a comma, semicolon, colon or
   dash, or at "and"/"but"/"und"/"aber", when the next word starts a clause of its own
   ("I", "my", "we", "ich", "mein", "wir" …, a question word, a request, an imperative).
   Leading interjections ("Hi,", "ok so", "thanks,", "Hallo,", "also") are dropped, and
   "remember that …", "note that …", "keep in mind that …", "merk dir, dass …" are read as
   the clause after "that"/"dass".
2. A clause is dropped when it is:
   - instruction-like (`memory.notes.instruction_like`; a whole sentence that is drops all
     its clauses);
   - a question: it ends with "?", or opens with a question word or a verb that opens a
     question ("what", "how", "do", "can", "is" …; "was", "wie", "kannst", "gibt" …);
   - a hypothetical: "if", "would", "could", "I'd", "suppose", "imagine"; "falls",
     "angenommen", "wäre", "hätte", "würde", "könnte";
   - a request or an imperative aimed at the assistant: it opens with "can you", "please",
     "tell me", "kannst du", "bitte", "sag mir" … or an imperative verb ("tell", "book",
     "find" …; "sag", "buch", "finde" …), holds "please", "bitte", "you to" or "dass du",
     or its subject is "you"/"du";
   - a greeting, thanks, filler or small talk: every word of it is on a fixed list ("hi",
     "thanks", "ok", "haha", "cool", "fine", "I see", "me too", "danke", "gut" …, a
     person's pronoun, "am", "is", "bin"), or it is feedback on an answer ("that helped me a
     lot", "das hat mir sehr geholfen", "this is really useful");
   - not about a person: it has no first-person word ("I", "my", "we", "our" …; "ich",
     "mein", "wir", "unser" …) and does not open with a name and a verb a person does
     ("Anna likes …", "Tom wohnt …");
   - shorter than three words.
3. Each clause left is one `add` of a fact: its content the clause (first letter upper-case,
   ending with "."), its source the item, its topics the first three words of the clause with
   three letters or more that are no stop words, folded to lowercase ASCII.
4. Said once: a statement that says nothing ("as I said"), or nothing an earlier one of the
   same speaker does not — a shown entry whose people are just the speaker, or an earlier
   statement in the run — is not proposed. What a statement says: its index terms (stemmed,
   stop words and filler such as "really", "as I said", "wirklich" left out) and its
   negations ("not", "never", "nicht", "kein" …). It says nothing more when both deny the
   same and each of its terms is one of the earlier's or ends one ("Rad" in "Fahrrad").
5. Corrections: a first-person statement of a subject — where the person lives ("I live
   in", "I moved to", "I now live in", "ich wohne (jetzt) in", "ich bin nach … gezogen"),
   where they work ("I work at/for", "ich arbeite bei"), their job ("I work as", "ich
   arbeite als"), their name ("my name is", "ich heiße"), their age ("I am 34", "ich bin 34
   Jahre alt") — replaces an older one of the same speaker and subject: within the run the
   last is kept, and every shown entry whose people are just the speaker, whose content has
   that subject and says something else gets an `invalidate`. So does a shown entry of just
   the speaker that shares a term with a statement said as a correction (its sentence holds
   "correction", "update", "I got that wrong", "no longer", "instead", "Korrektur", "doch",
   "nicht mehr", "stattdessen" …). The shown entries are those the run's reader may see; the
   apply checks that again.
"""

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.notes import instruction_like, normalized
from memory.services import is_topic
from memory.terms import STOP_WORDS, text_terms
from memorybot.providers.types import EntryText, ItemText


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FIRST_PERSON = _words(
    "i me my mine myself we us our ours ourselves ich mich mir mein meine meinen meinem meiner "
    "meines wir uns unser unsere unseren unserem unserer"
)
SECOND_PERSON = _words("you your yours u du dein deine deinen deinem deiner dir dich ihr euer eure")
QUESTION_OPENERS = _words(
    "what what's whats where when who whom whose which why how is are was were do does did "
    "can could would will shall should may might must have has had isn't aren't don't "
    "doesn't didn't can't won't any anyone anything "
    "was wo wann wer wen wem wessen welche welcher welches welchen welchem warum wieso weshalb "
    "weswegen wie woher wohin womit worüber wozu wofür kannst könntest kann können hast hat "
    "habt hättest bist ist sind seid gibt gab soll sollte sollen sollst darf dürfen muss musst "
    "müssen weißt weisst magst willst möchtest wirst wird würdest machst brauchst kennst "
    "findest denkst glaubst meinst warst hattest"
)
IMPERATIVES = _words(
    "tell show give help book find remind write make send explain list call check add search "
    "look get set create translate summarize summarise suggest recommend order cancel schedule "
    "let let's lets don't stop try use plan pick choose buy read play open start keep note "
    "remember describe compare calculate draft answer reply respond say bring take put go "
    "sag sage zeig zeige gib hilf buch buche finde find such suche schreib schreibe erklär "
    "erkläre mach mache schick schicke nenn nenne denk merk merke plane bestell bestelle "
    "erinnere erinner lass lasst hör schau sieh vergiss antworte übersetze übersetz empfiehl "
    "vergleiche berechne prüfe prüf öffne starte lies spiel nimm bring geh komm ruf frag"
)
# Imperatives that open a clause after a comma ("I am vegetarian, keep that in mind"); verbs
# that also list what a person does ("I like to cook, read and travel") are not among them.
CLAUSE_IMPERATIVES = _words(
    "tell show give help book find remind suggest recommend keep remember note let let's send "
    "check explain sag zeig gib hilf buch finde erinnere empfiehl denk merk schick erklär"
)
REQUEST_OPENERS = (
    "can you",
    "could you",
    "would you",
    "will you",
    "can u",
    "please",
    "pls",
    "plz",
    "tell me",
    "show me",
    "give me",
    "help me",
    "let me know",
    "remind me",
    "kannst du",
    "könntest du",
    "würdest du",
    "bitte",
    "sag mir",
    "zeig mir",
    "gib mir",
    "hilf mir",
    "erinnere mich",
)
REQUEST_WORDS = _words("please pls plz bitte")
REQUEST_PHRASES = re.compile(r"\byou to\b|\bdass (du|ihr)\b")
HYPOTHETICAL = _words(
    "if would wouldn't could couldn't suppose supposing imagine hypothetically "
    "falls angenommen wäre wären wärst hätte hätten hättest würde würden würdest könnte "
    "könnten"
)
HYPOTHETICAL_PHRASES = re.compile(r"\b\w+'d\b|\bstell dir vor\b")
# Greetings, thanks, filler, small talk and the words they are made of.
SMALL_TALK = _words(
    "hi hey hello hiya yo howdy greetings morning evening afternoon good night bye goodbye cya "
    "later cheers thanks thank thx ty you welcome ok okay k kk alright sure yes yeah yep yup no "
    "nope nah maybe haha hahaha hehe lol lmao rofl xd cool nice great awesome perfect wow oh ah "
    "hmm hm mhm uh um well so indeed right fine exactly true interesting sounds got it see "
    "noted sorry np much very a lot too me as the same to again all everyone everybody guys "
    "folks there dear day have weekend one really just and but also "
    "i my am is are m was doing feel feeling know agree understand guess think mean hope back "
    "here ready done glad not bad today now still "
    "hallo moin servus grüß gott tag guten morgen abend nacht gute tschüss tschüs ciao bis bald "
    "später danke dankeschön vielen dank bitte schön ja nein jo jep nö gut super toll prima "
    "klasse genau stimmt richtig klar alles echt krass ach aha achso naja na interessant "
    "verstehe verstanden schönen wochenende euch dir ihnen auch mir geht es s wie immer sehr "
    "ganz das ist passt ich bin weiß weiss sehe glaube denke hoffe zurück da fertig bereit leid "
    "tut froh nicht schlecht heute jetzt wieder und aber"
)
INTERJECTION = re.compile(
    r"^(hi|hey|hello|hiya|yo|good (morning|evening|afternoon)|thanks( a lot)?|thank you"
    r"( (so|very) much)?|ok(ay)?|so|well|oh|ah|yes|yeah|no|hmm|haha|lol|wow|cool|nice|great"
    r"|anyway|by the way|btw|actually|hallo|moin|servus|guten (morgen|tag|abend)|danke"
    r"( schön| sehr)?|vielen dank|ja|nein|gut|also|naja|na|ach|übrigens|okay)\b[\s,!.:;-]*",
    re.IGNORECASE,
)
EMBEDDED = re.compile(
    r"^(please\s+)?(remember|note|keep in mind|don't forget|do not forget|bear in mind)"
    r",?\s+that\s+",
    re.IGNORECASE,
)
EMBEDDED_GERMAN = re.compile(
    r"^(bitte\s+)?(merk dir|denk daran|vergiss nicht|beachte),?\s+dass\s+", re.IGNORECASE
)
PERSON_VERBS = _words(
    "likes loves hates lives works prefers wants needs plans eats drinks plays speaks studies "
    "moved mag liebt hasst wohnt lebt arbeitet bevorzugt will möchte braucht plant "
    "isst trinkt spielt spricht studiert zieht"
)
NOT_NAMES = _words(
    "the this that it there here everyone everybody nobody someone people they he she "
    "das der die es er sie man jeder niemand alle dies diese"
)
CONJUNCTIONS = re.compile(r"^(and|but|so|then|und|aber|also|dann|doch)\s+", re.IGNORECASE)
# A line break ends a sentence when the next line opens with a capital letter.
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\s*\n\s*(?=[A-ZÄÖÜ])")


def _opening(*phrases: str) -> str:
    """A look-ahead for a clause that opens with one of `phrases`."""
    ordered = sorted(set(phrases), key=len, reverse=True)
    return r"(?=(?:" + "|".join(re.escape(phrase) for phrase in ordered) + r")\b)"


# Where a new clause opens after a comma (or the like), or after "and"/"but"/"und"/"aber".
SUBJECT_OPENERS = _words(
    "i i'm i've i'll my we we're our ich mein meine meinen meinem meiner wir unser unsere "
    "unseren unserem unserer"
)
ASKING_OPENERS = _words("what where when why how was wo wann warum wieso weshalb wie woher wohin")
ASKING_PHRASES = "do you|did you|are you|is there|is it|any idea|hast du|weißt du|gibt es|bist du"
CLAUSE_BREAK = re.compile(
    r"\s*(?:[,;:]|\s[-–—])\s*(?:(?:and|but|und|aber)\s+)?"
    + _opening(
        *SUBJECT_OPENERS,
        *ASKING_OPENERS,
        *ASKING_PHRASES.split("|"),
        *CLAUSE_IMPERATIVES,
        *REQUEST_OPENERS,
    )
    + r"|\s+(?:and|but|und|aber)\s+"
    + _opening(*SUBJECT_OPENERS, *ASKING_OPENERS, *ASKING_PHRASES.split("|"), *REQUEST_OPENERS),
    re.IGNORECASE,
)
QUESTION_END = re.compile(r"\?[\s!?.)\"'»“”]*$")
# Questions put as statements.
WONDERING = re.compile(r"^(i wonder|i am wondering|i was wondering|ich frage mich|ich überlege)\b")
# German "dass ich … bin": the verb goes back after the subject ("ich bin …").
SUBORDINATE = re.compile(r"^(ich|wir)\s+(.+?)\s+([^\W\d_]+)$", re.IGNORECASE)
TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
SUBJECTS = {
    "home": re.compile(
        r"^i (now |still |currently |also )?(live|am living|have lived|have been living|moved"
        r"|have moved|relocated|have relocated)( back)? (in|to|at|near)\b"
        r"|^my home is\b"
        r"|^ich (wohne|lebe)( \w+){0,2} (in|im|bei|am|an)\b"
        r"|^ich bin( \w+){0,4} (umgezogen|gezogen)\b"
    ),
    "work": re.compile(
        r"^i (now |still |currently |also )?(work|am working|started working|have started "
        r"working|got a job|have a job|have a new job) (at|for)\b"
        r"|^my (employer|company) is\b"
        r"|^ich arbeite( \w+){0,2} (bei|für)\b"
    ),
    "job": re.compile(
        r"^i (now |still |currently )?work as\b|^my job is\b|^ich arbeite( \w+){0,2} als\b"
        r"|^ich bin( \w+)? von beruf\b"
    ),
    "name": re.compile(r"^my name is\b|^i am called\b|^mein name ist\b|^ich heisse\b"),
    "age": re.compile(r"^i am \d+( years old)?$|^i am \d+ years old\b|^ich bin \d+( jahre alt)?\b"),
}
# Feedback on an answer, and nothing else: "that helped me a lot", "das hat mir sehr geholfen".
FEEDBACK = re.compile(
    r"^(that|this|it|das|dies|es)( is| was| has| hat| ist| war)?( (really|very|so|a lot|sehr"
    r"|echt|mir|me|us|uns|wirklich))* (helped|helps|helpful|useful|works|worked|perfect|great"
    r"|geholfen|hilft|hilfreich|nützlich|klappt|funktioniert|perfekt|super|toll)"
    r"( (me|mir|us|uns|a lot|sehr|thanks|danke|weiter))*$"
)
FILLER = _words("really actually just wirklich eigentlich halt eben ja schon")
NEGATIONS = _words("not no never nor nicht kein keine keinen keinem keiner nie niemals")
# A sentence that opens as a correction, and a clause that says one.
CORRECTION_OPENS = re.compile(
    r"^(sorry |oh |ach )?(correction|update|i got that wrong|i was wrong|i meant|korrektur"
    r"|ich meinte|ich habe mich vertan)\b"
)
CORRECTION = re.compile(r"\b(no longer|not anymore|anymore|nicht mehr|stattdessen|verschoben)\b")
CORRECTION_WORDS = _words(
    "correction update wrong meant longer anymore korrektur meinte vertan stattdessen verschoben"
)
TOPIC_STOP = STOP_WORDS | _words("now really very jetzt also still currently mine meine wirklich")
MAX_TOPICS = 3


@dataclass(frozen=True)
class Statement:
    """A clause the learner keeps: the content to store and its subject, if it has one."""

    content: str
    subject: str | None
    corrects: bool = False


def statements(text: str) -> list[Statement]:
    """The statements of a person's text, in order (see the module)."""
    found = []
    for sentence in SENTENCE_END.split(text):
        sentence = " ".join(sentence.split())
        if not sentence or instruction_like(sentence):
            continue
        opens = CORRECTION_OPENS.match(normalized(sentence)) is not None
        for clause in CLAUSE_BREAK.split(sentence):
            kept = _statement(clause)
            if kept is not None:
                corrects = opens or CORRECTION.search(normalized(clause)) is not None
                found.append(Statement(kept, subject_of(kept), corrects))
    return found


def subject_of(content: str) -> str | None:
    """What a first-person statement is about, when the learner knows it: `home`, `work`,
    `job`, `name` or `age`."""
    plain = normalized(content)
    return next((name for name, pattern in SUBJECTS.items() if pattern.search(plain)), None)


def _statement(clause: str) -> str | None:
    """The clause as a statement to keep, or None (see the module)."""
    clause = clause.strip()
    question = QUESTION_END.search(clause) is not None
    while (opened := INTERJECTION.match(clause)) and opened.end() < len(clause):
        clause = clause[opened.end() :]
    clause = CONJUNCTIONS.sub("", clause)
    clause = EMBEDDED.sub("", clause)
    clause, german = EMBEDDED_GERMAN.subn("", clause)
    clause = clause.strip(" \t,;:.!…-–—\"'“”»«")
    if german and (verb_last := SUBORDINATE.match(clause)):
        clause = " ".join(verb_last.group(1, 3, 2))
    tokens = [token.casefold().replace("’", "'") for token in TOKEN.findall(clause)]
    words = normalized(clause).split()
    if question or len(words) < 3 or instruction_like(clause) or WONDERING.match(" ".join(words)):
        return None
    first = tokens[0]
    if set(words) <= SMALL_TALK or set(tokens) <= SMALL_TALK or FEEDBACK.match(" ".join(words)):
        return None
    if first in QUESTION_OPENERS or first in IMPERATIVES or first in SECOND_PERSON:
        return None
    lowered = " ".join(tokens)
    if any(lowered.startswith(opener + " ") for opener in REQUEST_OPENERS):
        return None
    if REQUEST_WORDS & set(tokens) or REQUEST_PHRASES.search(lowered):
        return None
    if HYPOTHETICAL & set(tokens) or HYPOTHETICAL_PHRASES.search(lowered):
        return None
    if not (FIRST_PERSON & set(words) or _names_a_person(clause, tokens)):
        return None
    return clause[0].upper() + clause[1:] + "."


def _names_a_person(clause: str, tokens: list[str]) -> bool:
    """Whether the clause opens with a name and a verb a person does ("Anna likes tea")."""
    return (
        len(tokens) > 1
        and clause[0].isupper()
        and tokens[0] not in NOT_NAMES
        and tokens[1] in PERSON_VERBS
    )


def _topics(content: str) -> list[str]:
    """The first words of `content` that make topics: three letters or more, no stop word,
    folded to lowercase ASCII."""
    decomposed = unicodedata.normalize("NFKD", content.casefold())
    folded = "".join(char for char in decomposed if not unicodedata.combining(char))
    chosen: list[str] = []
    for word in re.findall(r"[a-z0-9]+", folded):
        if len(word) >= 3 and word not in TOPIC_STOP and word not in chosen and is_topic(word):
            chosen.append(word)
    return chosen[:MAX_TOPICS]


def learned_changes(
    items: Sequence[ItemText], entries: Sequence[EntryText]
) -> list[dict[str, Any]]:
    """The offline learner's changes: an `add` per statement of a person's item, and an
    `invalidate` per shown entry a statement corrects (see the module)."""
    known = [(entry, _gist(entry.content)) for entry in entries]
    adds: list[tuple[str | None, Statement, ItemText, frozenset[str]]] = []
    for item in items:
        if item.kind != "person":
            continue
        for statement in statements(item.text):
            said = _gist(statement.content)
            ran = [add for add in adds if add[0] == item.person]
            # A subject corrected earlier in the run: what is shown of it no longer counts.
            replaced = statement.subject is not None and any(
                add[1].subject == statement.subject for add in ran
            )
            earlier = [
                gist
                for entry, gist in known
                if _only(entry, item.person)
                and not (replaced and subject_of(entry.content) == statement.subject)
            ] + [add[3] for add in ran]
            if not said or any(_says_nothing_more(said, gist) for gist in earlier):
                continue
            if statement.subject is not None:
                adds = [
                    add
                    for add in adds
                    if (add[0], add[1].subject) != (item.person, statement.subject)
                ]
            adds.append((item.person, statement, item, said))
    changes: list[dict[str, Any]] = [
        {
            "kind": "add",
            "layer": "fact",
            "content": statement.content,
            "sources": [{"chat": item.chat, "item": item.item}],
            "topics": _topics(statement.content),
        }
        for _, statement, item, _ in adds
    ]
    corrected = {(add[0], add[1].subject) for add in adds if add[1].subject}
    corrections = [(add[0], _spoken(add[3])) for add in adds if add[1].corrects]
    changes += [
        {"kind": "invalidate", "id": entry.id}
        for entry, gist in known
        if len(entry.people) == 1
        and (
            (entry.people[0], subject_of(entry.content)) in corrected
            or any(
                person == entry.people[0] and len(_spoken(gist) & said) >= min(2, len(gist))
                for person, said in corrections
            )
        )
    ]
    return changes


def _gist(content: str) -> frozenset[str]:
    """What `content` says, for telling a repeat: its index terms, filler left out, and its
    negations."""
    plain = normalized(content)
    for phrase in ("as i said", "wie gesagt"):
        plain = plain.replace(phrase, " ")
    words = [word for word in plain.split() if word not in FILLER]
    return frozenset(text_terms(" ".join(words))) | (frozenset(words) & NEGATIONS)


def _spoken(gist: frozenset[str]) -> frozenset[str]:
    """The terms of a gist that say what it is about: no negation, no correction's word."""
    return gist - NEGATIONS - CORRECTION_WORDS


def _says_nothing_more(said: frozenset[str], earlier: frozenset[str]) -> bool:
    """Whether every term of `said` is one of `earlier`'s or ends one (a German compound:
    four letters or more before it), and both deny the same."""
    return said & NEGATIONS == earlier & NEGATIONS and all(
        term in earlier
        or any(len(other) - len(term) >= 4 and other.endswith(term) for other in earlier)
        for term in said
    )


def _only(entry: EntryText, person: str | None) -> bool:
    """Whether `person` is the one person of `entry`."""
    return person is not None and entry.people == (person,)
