"""[A13, E9] What schemathesis cannot read from the schema alone, loaded by .ci/schemathesis.sh.

A topic's pattern shapes only its ASCII characters: beyond ASCII it takes any character, and
the `topic` format names the rule that decides (lowercase letters of any script, digits, marks
after them). Positive cases draw topics by that very rule (`memory.topics`), so that every
topic generated is one the server accepts; negative cases still break the pattern or the
length, which the server refuses.
"""

import sys
from pathlib import Path

import schemathesis
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.topics import topic_of  # noqa: E402  (the repository, put on the path above)

_PART = st.text(
    alphabet=st.characters(categories=("Ll", "Lm", "Lo", "Nd", "Mn", "Mc")),
    min_size=1,
    max_size=12,
)
TOPIC = (
    st.lists(_PART, min_size=1, max_size=3)
    .map("-".join)
    .map(topic_of)
    .filter(lambda topic: topic is not None)
)

schemathesis.openapi.format("topic", TOPIC)
