"""[R5] Figures compared with each other are taken at the same moments: `timed_in_turn` runs
its calls in turn, so that a step from one pool size to the next is not the machine's drift
between two runs."""

from bench.timing import timed_in_turn


def test_calls_timed_in_turn_take_turns_and_each_has_its_own_figure() -> None:
    calls: list[str] = []
    timings = timed_in_turn(
        [lambda: calls.append("small"), lambda: calls.append("large")], runs=4, warmup=1
    )
    assert calls == ["small", "large"] * 5
    assert [timing.runs for timing in timings] == [4, 4]
    assert all(0 <= timing.p50_ms <= timing.p95_ms for timing in timings)
