"""Test settings: SQLite unless DATABASE_URL names PostgreSQL; fixed test keys."""

import os
import tempfile

TEST_ENCRYPTION_KEY = "dGVzdC1vbmx5LW9wZW5ib3QtZW5jcnlwdGlvbi1rZXk="
os.environ.setdefault("OPENBOT_ENCRYPTION_KEYS", TEST_ENCRYPTION_KEY)

from settings.dev import *  # noqa: E402, F403
from settings.dev import DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"] == "openbot.sqlite_backend":
    # A file, not ":memory:": the in-memory test database uses SQLite's shared cache, whose
    # table locks fail at once ("database table is locked") when threads write together,
    # instead of waiting out the busy timeout as a file database does.
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"openbot-test-{os.getpid()}.sqlite3")
    }
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
OPENBOT_INPROCESS_WORKER = False  # tests start their own workers
# Limits are tested where they are set (tests/openbot/test_throttles.py).
OPENBOT_THROTTLE_RATES = {"token": None, "writes": None, "auth_failures": None}
