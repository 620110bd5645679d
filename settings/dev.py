"""The default: SQLite, in-process worker, works with no environment variables."""

import warnings

from settings.base import *  # noqa: F403
from settings.base import OPENBOT_ENCRYPTION_KEYS, dramatiq_broker
from settings.env import env_bool, env_str

DEBUG = True
SECRET_KEY = env_str("SECRET_KEY", "dev-only-insecure-secret-key")
ALLOWED_HOSTS = ["*"]

# A fixed development key so the embedded setup runs with no configuration. Never use it
# for real data: production refuses to start without OPENBOT_ENCRYPTION_KEYS.
DEV_ENCRYPTION_KEY = "ZGV2LW9ubHktb3BlbmJvdC1lbmNyeXB0aW9uLWtleSE="
if not OPENBOT_ENCRYPTION_KEYS:
    warnings.warn(
        "OPENBOT_ENCRYPTION_KEYS is not set: using the development encryption key",
        stacklevel=1,
    )
    OPENBOT_ENCRYPTION_KEYS = [DEV_ENCRYPTION_KEY]

# With no broker URL, actors run in a worker thread inside this process: nothing to
# install. OPENBOT_BROKER_URL (redis://… or amqp://…) selects a real broker instead.
DRAMATIQ_BROKER = dramatiq_broker(env_str("OPENBOT_BROKER_URL"))
OPENBOT_INPROCESS_WORKER = env_bool("OPENBOT_INPROCESS_WORKER", not env_str("OPENBOT_BROKER_URL"))
