"""Test settings: SQLite unless DATABASE_URL names PostgreSQL; fixed test keys."""

import os

TEST_ENCRYPTION_KEY = "dGVzdC1vbmx5LW9wZW5ib3QtZW5jcnlwdGlvbi1rZXk="
os.environ.setdefault("OPENBOT_ENCRYPTION_KEYS", TEST_ENCRYPTION_KEY)

from settings.dev import *  # noqa: E402, F403
from settings.dev import DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["NAME"] = ":memory:"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
OPENBOT_INPROCESS_WORKER = False  # tests start their own workers
