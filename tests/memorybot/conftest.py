from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

PRICE = "openai:gpt-test=150/600"


@pytest.fixture(autouse=True)
def memorybot_settings(settings: Settings, tmp_path: Path) -> None:
    """Slot files of each test in a directory of its own; a known price for `gpt-test`."""
    settings.OPENBOT_SLOT_DIR = str(tmp_path / "slots")
    settings.OPENBOT_MODEL_PRICES = PRICE
