"""[G3] The load benchmark runs end to end: a short run of real HTTP clients against the
embedded setup (`runserver`, SQLite file, in-process worker) prints its summary with no 5xx,
no acknowledged write lost and every learning run ended. The figures of full runs, on both
setups, are in docs/benchmarks.md."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_embedded_load_run_meets_its_targets() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.load", "--setup", "embedded"]
        + ["--seconds", "5", "--clients", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    summary = done.stdout
    assert done.returncode == 0, summary[-3000:] + done.stderr[-3000:]
    assert "5xx responses: 0\n" in summary
    assert "; lost: 0;" in summary
    requests = re.search(r"^requests: (\d+) in", summary, re.MULTILINE)
    runs = re.search(
        r"^learning runs: (\d+) .*not ended 60 s after the load stopped: 0", summary, re.MULTILINE
    )
    assert requests and int(requests.group(1)) > 0, summary
    assert runs and int(runs.group(1)) > 0, summary  # turns were taken and learned from
