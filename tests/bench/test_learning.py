"""[K1] The learning benchmark: its written chats are consistent, its scoring tells a learner
that keeps statements from one that keeps messages, and the offline run goes end to end
through the turn route and the worker."""

from collections import Counter

import pytest

from bench import learning
from bench.learning import Learned, Score, holds, words
from bench.learning_chats import CHATS, KINDS, PEOPLE, WrittenChat
from tests.memorybot.learning_world import flush_broker


def chat(name: str) -> WrittenChat:
    return next(chat for chat in CHATS if chat.name == name)


def score_of(chat: WrittenChat, *learned: tuple[str, str, bool]) -> Score:
    score = Score(model="test")
    score.chat_score(
        chat, [Learned(text, frozenset({who}), active) for who, text, active in learned]
    )
    return score


def test_the_chats_cover_what_the_benchmark_promises() -> None:
    assert len(CHATS) >= 60 and len({chat.name for chat in CHATS}) == len(CHATS)
    kinds = Counter((chat.language, chat.group) for chat in CHATS)
    assert set(kinds) == {(language, group) for language in PEOPLE for group in (False, True)}
    assert {non_fact.kind for chat in CHATS for non_fact in chat.non_facts} == set(KINDS)
    assert sum(bool(chat.superseded) for chat in CHATS) >= 5
    assert 0 < sum(chat.quick for chat in CHATS) <= 10
    for written in CHATS:
        speakers = {who for who, _ in written.turns}
        assert speakers <= set(PEOPLE[written.language]), written.name
        assert written.group or len(speakers) == 1, written.name
        # Every gold fact is stated in one turn of its person; every non-fact is said.
        for fact in (*written.facts, *written.superseded):
            said = [text for who, text in written.turns if who == fact.who]
            assert any(holds(fact.keys, words(text)) for text in said), (written.name, fact)
        for non_fact in written.non_facts:
            assert any(holds(non_fact.keys, words(text)) for _, text in written.turns), (
                written.name,
                non_fact,
            )


def test_words_and_keys() -> None:
    assert words("Ich wohne in Köln, Straße 5!") == ["ich", "wohne", "in", "koln", "strasse", "5"]
    assert holds(["koln|cologne"], words("Jonas lives in Cologne"))
    assert holds(["allerg", "peanut"], words("Allergic to peanuts"))
    assert holds(["cat"], words("two cats")) and not holds(["cat"], words("a catalogue"))
    assert not holds(["hamburg"], words("Berlin"))


def test_a_learner_that_keeps_statements_scores_above_one_that_keeps_messages() -> None:
    home = chat("en-home-allergy")
    whole = score_of(home, ("ana", home.turns[0][1], True))
    statements = score_of(
        home,
        ("ana", "Ana lives in Hamburg.", True),
        ("ana", "Ana is allergic to peanuts.", True),
    )
    assert (whole.right, whole.active, whole.recalled, whole.gold) == (0, 1, 2, 2)
    assert whole.stored == Counter({"question": 1})
    assert (statements.right, statements.active, statements.recalled) == (2, 2, 2)
    assert not statements.stored
    # A fact on the wrong person is neither right nor recalled.
    elsewhere = score_of(home, ("ben", "Ana lives in Hamburg.", True))
    assert (elsewhere.right, elsewhere.recalled) == (0, 0)


def test_duplicates_and_corrections_are_counted() -> None:
    repeat = chat("en-repeat")
    twice = score_of(repeat, ("ben", "I'm vegetarian.", True), ("ben", "Ben is vegetarian", True))
    assert (twice.duplicates, twice.right) == (1, 2)
    move = chat("en-correction-move")
    kept = score_of(
        move, ("carla", "Carla lives in Leeds.", True), ("carla", "Carla lives in York.", True)
    )
    resolved = score_of(
        move, ("carla", "Carla lives in Leeds.", False), ("carla", "Carla lives in York.", True)
    )
    assert (kept.contradictions, kept.resolved, kept.right, kept.active) == (1, 0, 1, 2)
    assert (resolved.contradictions, resolved.resolved, resolved.right) == (1, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_the_offline_quick_run_goes_through_the_route_and_the_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flush_broker()
    [score] = learning.run(models=[learning.OFFLINE], quick=True)
    quick = [written for written in CHATS if written.quick]
    assert score.chats == len(quick)
    assert score.turns == score.steps == sum(len(written.turns) for written in quick)
    assert score.gold == sum(len(written.facts) for written in quick)
    printed = capsys.readouterr().out
    assert "[K1] what learning keeps" in printed and learning.MATCHING_RULE in printed
