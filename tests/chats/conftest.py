# Turns call the memory bot: its tests' settings hold here too (slot files of each test in a
# directory of its own; a known price for `gpt-test`).
from tests.memorybot.conftest import memorybot_settings  # noqa: F401
