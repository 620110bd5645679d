"""[R5] Written conversations for the recall benchmark: multi-session dialogs between two people
with dates, and questions of five kinds about what they said.

Each conversation has two speakers who meet in sessions a few days apart. A session is small
talk (greetings, reactions, questions back) with, now and then, something a speaker states about
their life: a frame below with a value ("I adopted a puppy last week, we named him Rocky.").
Both speakers draw frames from the same list with other values, and small talk reuses the
frames' words ("There is a pottery fair in town next month."), so the words of a question are
found in many turns. Every turn is stored as one memory, "Speaker: text", at the session's time.

Questions, each with the turns that answer it:
- single-hop: shares a word (stem) or two with its answer ("What is the name of Anna's puppy?");
- paraphrase: shares no stem with its answer but the speaker's name ("What did Anna call the
  new dog?"), checked with the search index's own stemmer when the set is made;
- temporal: "when" ("When did Anna adopt the puppy?"), answered by the session's date;
- multi-hop: two facts of one speaker in two turns, one asked by its words and one paraphrased;
- dated: the paraphrase, asked with the month it was said in ("… in May 2023?") [R8].

Written by hand for this benchmark, English only; nothing is downloaded.
"""

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory.terms import query_terms


@dataclass(frozen=True)
class Frame:
    """Something a person states about their life, and how others ask about it. `{v}` is the
    value, `{n}` the speaker's name."""

    said: str
    values: tuple[str, ...]
    single: str
    paraphrase: str
    when: str
    # Small talk that shares the statement's words without stating it.
    near: str


FRAMES = [
    Frame(
        "I signed up for a pottery class, I made a {v} on my first day!",
        ("bowl", "mug", "vase", "plate"),
        "What did {n} make at the pottery class?",
        "Which hobby involving clay has {n} picked up?",
        "When did {n} sign up for the pottery class?",
        "There is a pottery fair in town next month, the class from school is going.",
    ),
    Frame(
        "We adopted a puppy last week, we named him {v}.",
        ("Max", "Rocky", "Bruno", "Pepper"),
        "What is the name of {n}'s puppy?",
        "What did {n} call the new dog?",
        "When did {n} adopt the puppy?",
        "The neighbours' puppy kept me awake all week.",
    ),
    Frame(
        "I finally moved to {v}, the new flat is tiny but bright.",
        ("Lisbon", "Porto", "Vienna", "Hamburg"),
        "Which city did {n} move to?",
        "Where is {n} living these days?",
        "When did {n} move to the new flat?",
        "Moving flats is the worst, I hope I never have to do it again.",
    ),
    Frame(
        "I got the job as a {v} at the hospital!",
        ("nurse", "pharmacist", "radiographer", "paramedic"),
        "What job did {n} get at the hospital?",
        "What is {n}'s occupation now?",
        "When did {n} get the hospital job?",
        "My aunt was in the hospital for a week, she is fine now.",
    ),
    Frame(
        "I have been practicing the {v} every evening.",
        ("cello", "violin", "piano", "flute"),
        "Which instrument has {n} been practicing every evening?",
        "What kind of music lessons is {n} taking?",
        "When did {n} talk about practicing an instrument?",
        "Practicing anything every evening is hard after a long day.",
    ),
    Frame(
        "I ran the {v} marathon on Sunday and finished in under four hours!",
        ("Berlin", "Vienna", "Valencia", "Munich"),
        "Which marathon did {n} run?",
        "What long-distance race did {n} complete?",
        "When did {n} run the marathon?",
        "I could never run a marathon, my knees would give up.",
    ),
    Frame(
        "The doctor told me I'm allergic to {v}.",
        ("peanuts", "shellfish", "cats", "pollen"),
        "What is {n} allergic to?",
        "What gives {n} a bad reaction?",
        "When did the doctor tell {n} about the allergy?",
        "My doctor is always running late, I waited an hour today.",
    ),
    Frame(
        "My sister {v} is getting married in the summer.",
        ("Lena", "Sofia", "Mara", "Julia"),
        "Which of {n}'s sisters is getting married?",
        "Whose wedding is {n}'s family preparing for?",
        "When did {n} say the sister is getting married?",
        "Summer is going to be busy, so many plans already.",
    ),
    Frame(
        "I just finished reading {v}, what a story.",
        ("Dune", "Emma", "Beloved", "Rebecca"),
        "Which book did {n} finish reading?",
        "What novel did {n} get through recently?",
        "When did {n} finish reading {v}?",
        "I keep buying books and never reading them.",
    ),
    Frame(
        "I bought a used {v} so I can drive to work.",
        ("Volvo", "Toyota", "Fiat", "Skoda"),
        "What car did {n} buy to drive to work?",
        "Which vehicle does {n} commute with?",
        "When did {n} buy the used car?",
        "Traffic on the way to work was terrible this morning.",
    ),
    Frame(
        "I planted {v} in the garden this weekend.",
        ("tomatoes", "tulips", "basil", "strawberries"),
        "What did {n} plant in the garden?",
        "What is growing in {n}'s backyard?",
        "When did {n} plant the {v}?",
        "The garden centre was packed this weekend.",
    ),
    Frame(
        "I volunteer at the {v} shelter on Saturdays now.",
        ("animal", "homeless", "women's", "youth"),
        "Where does {n} volunteer on Saturdays?",
        "What charity work does {n} do at weekends?",
        "When did {n} start at the shelter?",
        "Saturdays are my only day to sleep in.",
    ),
    Frame(
        "I started learning {v} with an app.",
        ("Japanese", "Spanish", "Italian", "Korean"),
        "Which language is {n} learning with an app?",
        "What foreign tongue is {n} studying?",
        "When did {n} start learning {v}?",
        "That app keeps sending me notifications all day.",
    ),
    Frame(
        "We are flying to {v} for our holiday in August.",
        ("Iceland", "Japan", "Peru", "Kenya"),
        "Where is {n} flying for the holiday?",
        "Which country will {n} travel to on vacation?",
        "When is {n}'s holiday in {v}?",
        "Flying always makes me nervous, even short trips.",
    ),
    Frame(
        "I've been vegetarian for {v} years now.",
        ("two", "five", "ten", "three"),
        "How many years has {n} been vegetarian?",
        "How long has {n} avoided eating meat?",
        "When did {n} say how long they had been vegetarian?",
        "The new vegetarian place downtown is not bad.",
    ),
    Frame(
        "My son {v} started kindergarten today.",
        ("Leo", "Noah", "Finn", "Emil"),
        "What is the name of {n}'s son?",
        "What is {n}'s boy called?",
        "When did {n}'s son start kindergarten?",
        "The kindergarten near us has a waiting list of a year.",
    ),
    Frame(
        "I painted a {v} for my mother's birthday.",
        ("sunset", "lake", "portrait", "forest"),
        "What did {n} paint for the birthday?",
        "What artwork did {n} create as a gift?",
        "When did {n} paint the {v}?",
        "I forgot my friend's birthday again, I feel awful.",
    ),
    Frame(
        "I broke my {v} while skiing.",
        ("wrist", "ankle", "arm", "leg"),
        "What did {n} break while skiing?",
        "Which bone did {n} fracture on the slopes?",
        "When did {n} get hurt skiing?",
        "Skiing is so expensive these days.",
    ),
    Frame(
        "We saw {v} live at the stadium last night.",
        ("Coldplay", "Adele", "Muse", "Queen"),
        "Who did {n} see live at the stadium?",
        "Which band or singer's show did {n} attend?",
        "When did {n} see {v} live?",
        "The stadium is right next to my office, the noise is unreal.",
    ),
    Frame(
        "I enrolled in an evening course on {v}.",
        ("accounting", "photography", "coding", "sewing"),
        "What evening course did {n} enroll in?",
        "What is {n} studying at night school?",
        "When did {n} enroll in the evening course?",
        "Of course, I'll call you in the evening.",
    ),
    Frame(
        "My favourite dish is my grandmother's {v}.",
        ("lasagna", "goulash", "paella", "dumplings"),
        "What is {n}'s favourite dish?",
        "Which meal does {n} love most?",
        "When did {n} talk about the grandmother's cooking?",
        "My grandmother turns ninety next year.",
    ),
    Frame(
        "I joined a {v} team at the community centre.",
        ("volleyball", "basketball", "football", "hockey"),
        "Which team did {n} join at the community centre?",
        "What sport does {n} play with a local club?",
        "When did {n} join the {v} team?",
        "The community centre is closed for repairs again.",
    ),
    Frame(
        "We are renovating the kitchen, the new tiles are {v}.",
        ("blue", "green", "white", "black"),
        "What colour are {n}'s new kitchen tiles?",
        "How is {n}'s home improvement project looking?",
        "When did {n} start renovating the kitchen?",
        "Our kitchen is a mess, nobody does the dishes.",
    ),
    Frame(
        "I passed my driving test on the {v} attempt.",
        ("first", "second", "third", "fourth"),
        "On which attempt did {n} pass the driving test?",
        "How many tries did {n} need to get a licence?",
        "When did {n} pass the driving test?",
        "Driving in the snow today was scary.",
    ),
    Frame(
        "My best friend {v} is visiting from Canada next week.",
        ("Priya", "Omar", "Chloe", "Hugo"),
        "Who is visiting {n} from Canada?",
        "Which close pal of {n} is coming over from abroad?",
        "When is {n}'s friend from Canada visiting?",
        "It's been a busy week, I need a break.",
    ),
    Frame(
        "I baked a {v} cake for the office party.",
        ("carrot", "chocolate", "lemon", "cheese"),
        "What cake did {n} bake for the office party?",
        "What dessert did {n} make for colleagues?",
        "When did {n} bake the cake?",
        "The office party got cancelled last year.",
    ),
    Frame(
        "I'm terrified of {v}, I can't even look at pictures.",
        ("spiders", "snakes", "heights", "clowns"),
        "What is {n} terrified of?",
        "What is {n}'s biggest fear?",
        "When did {n} talk about being terrified?",
        "Send me the pictures from Saturday when you can.",
    ),
    Frame(
        "I've been doing {v} every morning to cope with stress.",
        ("yoga", "meditation", "pilates", "tai chi"),
        "What does {n} do every morning to cope with stress?",
        "How does {n} relax when anxious?",
        "When did {n} start doing {v} in the mornings?",
        "Work has been stressful this month.",
    ),
    Frame(
        "We went camping by Lake {v} with the kids.",
        ("Garda", "Bled", "Como", "Hallstatt"),
        "Which lake did {n} go camping by?",
        "Where did {n}'s family pitch a tent?",
        "When did {n} go camping?",
        "The kids want to go camping again, I'm not so sure.",
    ),
    Frame(
        "I got promoted to {v} manager!",
        ("project", "sales", "product", "store"),
        "What was {n} promoted to?",
        "What new role does {n} have at the company?",
        "When did {n} get promoted?",
        "My manager finally approved my days off.",
    ),
]

SMALL_TALK = [
    "Hey! How have you been?",
    "Good to hear from you!",
    "How was your week?",
    "Not much, just the usual.",
    "That sounds amazing!",
    "Oh no, I'm sorry to hear that.",
    "Haha, that's so you.",
    "What are you up to this weekend?",
    "I'm so tired today.",
    "Wow, congratulations!",
    "Tell me more!",
    "That's wonderful news.",
    "I totally understand.",
    "Same here, honestly.",
    "How is your family doing?",
    "Everyone is fine, thanks for asking.",
    "The weather has been lovely lately.",
    "It rained all day here.",
    "Let's catch up again soon.",
    "Talk to you later!",
    "Take care!",
    "I've been thinking about what you said last time.",
    "You always know how to cheer me up.",
    "Did you watch anything good recently?",
    "I need a holiday so badly.",
    "Work is keeping me busy.",
    "That's a great idea.",
    "I'm proud of you.",
    "Sounds like a plan!",
    "What made you decide that?",
    "I can't believe it's already this late in the year.",
    "Thanks, that means a lot.",
]

NAMES = [
    ("Anna", "Ben"), ("Carla", "David"), ("Elif", "Farid"), ("Greta", "Hannes"),
    ("Ines", "Jonas"), ("Kira", "Luca"), ("Mina", "Nils"), ("Olga", "Pavel"),
    ("Rosa", "Samir"), ("Tara", "Ulrich"),
]  # fmt: skip

SESSIONS = 20
FRAMES_PER_SPEAKER = 16
MULTI_HOP_PER_SPEAKER = 8
START = datetime(2023, 1, 9, 18, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    at: datetime

    @property
    def content(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    # Indexes into the conversation's turns.
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class Conversation:
    turns: list[Turn]
    questions: list[Question]


KINDS = ("single-hop", "multi-hop", "temporal", "paraphrase", "dated")


def _shares_stem(question: str, answer: str, name: str) -> bool:
    """Whether `question` and `answer` share a search term other than the speaker's name."""
    ours = set(query_terms(question)) - set(query_terms(name))
    return bool(ours & set(query_terms(answer)))


def conversation(index: int, rng: random.Random) -> Conversation:
    """The `index`-th conversation: its turns and the questions about them."""
    speakers = NAMES[index % len(NAMES)]
    facts = {
        speaker: [
            (frame, rng.choice(frame.values)) for frame in rng.sample(FRAMES, FRAMES_PER_SPEAKER)
        ]
        for speaker in speakers
    }
    # Each fact goes to a session; the sessions are 3 to 14 days apart.
    placed: dict[int, list[tuple[str, Frame, str]]] = {}
    for speaker, said in facts.items():
        for frame, value in said:
            placed.setdefault(rng.randrange(SESSIONS), []).append((speaker, frame, value))
    turns: list[Turn] = []
    where: dict[tuple[str, int], int] = {}
    at = START + timedelta(days=index)
    for session in range(SESSIONS):
        at += timedelta(days=rng.randint(3, 14), minutes=rng.randint(0, 180))
        lines: list[tuple[str, str, tuple[str, int] | None]] = [
            (speakers[(session + line) % 2], rng.choice(SMALL_TALK), None)
            for line in range(rng.randint(18, 26))
        ]
        for speaker, frame, value in placed.get(session, []):
            lines.insert(
                rng.randrange(1, len(lines)),
                (speaker, frame.said.format(v=value), (speaker, FRAMES.index(frame))),
            )
        for _ in range(3):
            other = rng.choice(FRAMES)
            lines.insert(rng.randrange(1, len(lines)), (rng.choice(speakers), other.near, None))
        for number, (speaker, text, fact) in enumerate(lines):
            if fact is not None:
                where[fact] = len(turns)
            turns.append(Turn(speaker, text, at + timedelta(minutes=number)))
    questions = []
    for speaker, said in facts.items():
        for frame, value in said:
            turn = where[(speaker, FRAMES.index(frame))]
            answer = turns[turn].content
            paraphrase = frame.paraphrase.format(n=speaker)
            assert not _shares_stem(paraphrase, answer, speaker), paraphrase
            questions += [
                Question("single-hop", frame.single.format(n=speaker, v=value), (turn,)),
                Question("paraphrase", paraphrase, (turn,)),
                Question("temporal", frame.when.format(n=speaker, v=value), (turn,)),
                Question(
                    "dated",
                    f"{paraphrase.rstrip('?')} in {turns[turn].at:%B %Y}?",
                    (turn,),
                ),
            ]
        for (first, first_value), (second, _) in rng.sample(
            list(zip(said, said[1:], strict=False)), MULTI_HOP_PER_SPEAKER
        ):
            also = second.paraphrase.format(n=speaker)
            text = (
                f"{first.single.format(n=speaker, v=first_value)} And {also[0].lower()}{also[1:]}"
            )
            evidence = tuple(where[(speaker, FRAMES.index(frame))] for frame in (first, second))
            questions.append(Question("multi-hop", text, evidence))
    return Conversation(turns, questions)


def conversations(count: int = len(NAMES), *, seed: int = 5) -> list[Conversation]:
    rng = random.Random(seed)
    return [conversation(index, rng) for index in range(count)]
