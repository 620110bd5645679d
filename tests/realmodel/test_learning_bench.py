"""[K1] The quick subset of the learning benchmark (`python -m bench --learning --quick`) on
the real model: it runs to the end and prints its table, and the model's learning steps apply
a change at least as often as they were seen to (a floor, not a target)."""

import pytest

from bench import learning
from memorybot.local_model import MODEL as LOCAL_MODEL
from tests.memorybot.learning_world import flush_broker
from tests.realmodel.recorder import Recorder

pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]

# The share of learning steps that applied at least one change, as low as it was seen in
# several runs of the quick subset (docs/benchmarks.md, K1).
APPLIED_FLOOR = 0.3


def test_the_quick_learning_benchmark_runs_on_the_real_model(
    local_model_calls: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    flush_broker()
    [score] = learning.run(models=[LOCAL_MODEL], quick=True)
    printed = capsys.readouterr().out
    assert "[K1] what learning keeps" in printed
    assert LOCAL_MODEL in printed and learning.MATCHING_RULE in printed
    quick = [chat for chat in learning.CHATS if chat.quick]
    assert score.chats == len(quick) and score.turns == sum(len(chat.turns) for chat in quick)
    assert score.steps == score.turns  # every turn confided, every run called the model
    assert score.applied / score.steps >= APPLIED_FLOOR
    print(printed)
