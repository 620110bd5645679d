"""Settings shared by every environment; see dev.py, test.py and production.py."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from settings.env import env_days, env_float, env_int, env_list, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_dramatiq",
    "openbot",
    "chats",
    "conversations",
    "people",
    "memory",
    "memorybot",
]

MIDDLEWARE = [
    "openbot.middleware.JsonNotFound",
    "django.middleware.security.SecurityMiddleware",
    "openbot.middleware.RefuseNulCharacters",
    "openbot.middleware.AnswerDatabaseUnavailable",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "settings.urls"
WSGI_APPLICATION = "settings.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}") or "",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # psycopg prepares a query the second time a connection runs it. Only the
    # server-binding cursors of openbot.compiled are ever prepared (Django's own bind on the
    # client); 0 turns it off, as a connection pooler in transaction mode needs. A prepared
    # query keeps one generic plan for its connection: left to choose, PostgreSQL went back to
    # planning a listing on every call after a few readers of a small pool, which is slower.
    threshold = env_int("DATABASE_PREPARE_THRESHOLD", 1, minimum=0)
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["prepare_threshold"] = threshold or None
    # No JIT either: the estimate of a full listing's access check counts the set of
    # entries that pass (memory.access.every_visible_entry) once per entry, far above
    # `jit_above_cost`, and PostgreSQL compiled the statement on every call, which took far
    # longer than running it. Without preparing (0, as behind a pooler, which refuses or
    # drops connection options) nothing is sent: set `jit = off` for the role on the server.
    if threshold:
        server_options = "-c plan_cache_mode=force_generic_plan -c jit=off"
        options["options"] = f"{options.get('options', '')} {server_options}".strip()
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # [G1] Requests and the in-process worker write at once. Every transaction takes the
    # write lock when it begins (IMMEDIATE): one that reads first and writes later would get
    # "database is locked" at once, whatever the timeout. WAL lets readers read while one
    # writer writes; other writers wait up to the busy timeout (then 503, openbot/errors.py),
    # the threads of this process in line (openbot/sqlite_backend).
    DATABASES["default"]["ENGINE"] = "openbot.sqlite_backend"
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "timeout": 20,
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

# The largest request body we read; bigger bodies get a 413, never a 500.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["openbot.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["openbot.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["openbot.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "openbot.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "openbot.schema.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # [T1] Each reads its rate from OPENBOT_THROTTLE_RATES below.
    "DEFAULT_THROTTLE_CLASSES": [
        "openbot.throttles.TokenThrottle",
        "openbot.throttles.WriteThrottle",
    ],
}
# [T1] How fast one token may call, one person may write (Remember, Forget, turns …), and one
# client address may fail authentication; `off` lifts a limit. A limit is counted in the
# cache: each process its own (LocMem) unless OPENBOT_CACHE_URL names a shared Redis, which
# several gunicorn workers need to count together.
OPENBOT_THROTTLE_RATES = {
    "token": env_rate("OPENBOT_THROTTLE_TOKEN", "1200/min"),
    "writes": env_rate("OPENBOT_THROTTLE_WRITES", "120/min"),
    "auth_failures": env_rate("OPENBOT_THROTTLE_AUTH_FAILURES", "20/min"),
}
CACHE_URL = env_str("OPENBOT_CACHE_URL")
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured("OPENBOT_CACHE_URL must be a redis:// URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

SPECTACULAR_SETTINGS = {
    "TITLE": "OpenBot Bot Memory API",
    "VERSION": "1.0.0",
    "COMPONENT_SPLIT_REQUEST": True,
    # Operations are tagged by the segment after /v1 (bots, chats, …); named, since the health
    # endpoints outside /v1 would otherwise leave no common prefix to find.
    "SCHEMA_PATH_PREFIX": "/v1",
    # A PATCH body keeps its required fields (`expected`): no all-optional "Patched…".
    "COMPONENT_SPLIT_PATCH": False,
    "SERVE_INCLUDE_SCHEMA": False,
    "DESCRIPTION": (
        "OpenBot Bot Memory: a bot's memory as each person may see it, chats with the bot, and "
        'what its memory bot did. Errors are `{"error": {"code", "message"[, '
        '"fields"]}}`. Review confessions before showing them to people.'
    ),
    # The docs UI loads its assets from this server, never from the network.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # An entry's and a learning run's `status` are different choice sets: each its own name.
    "ENUM_NAME_OVERRIDES": {
        "EntryStatusEnum": "memory.models.Entry.Status",
        "LearningRunStatusEnum": "memorybot.models.LearningRun.Status",
    },
}

# Encryption keys: comma-separated Fernet keys; the first encrypts, all decrypt.
OPENBOT_ENCRYPTION_KEYS = env_list("OPENBOT_ENCRYPTION_KEYS")
# The key of the search index's term hashes (32+ characters); unset: derived from the
# first encryption key. After changing either, `manage.py reindex` re-keys the index.
OPENBOT_INDEX_KEY = env_str("OPENBOT_INDEX_KEY")

# OpenAI-compatible provider.
OPENBOT_OPENAI_BASE_URL = env_str("OPENBOT_OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENBOT_OPENAI_API_KEY = env_str("OPENBOT_OPENAI_API_KEY", "")
# Prices in micro-USD per 1,000 tokens, keyed by "<provider>:<model>".
# Example: OPENBOT_MODEL_PRICES="openai:gpt-4o-mini=150/600" (input/output).
OPENBOT_MODEL_PRICES = env_str("OPENBOT_MODEL_PRICES", "") or ""
# Which server this process runs on: slots for concurrency are per server.
OPENBOT_SERVER_ID = env_str("OPENBOT_SERVER_ID", "local") or "local"
# Where the per-server slot lock files live (default: <tmp>/openbot-slots).
OPENBOT_SLOT_DIR = env_str("OPENBOT_SLOT_DIR")
# Deadlines, in seconds.
OPENBOT_REPLY_DEADLINE_SECONDS = env_float("OPENBOT_REPLY_DEADLINE_SECONDS", 15.0)
OPENBOT_LEARNING_STEP_SECONDS = env_float("OPENBOT_LEARNING_STEP_SECONDS", 120.0)
# How long the bot's own model may take to answer one round of a turn.
OPENBOT_ANSWER_DEADLINE_SECONDS = env_float("OPENBOT_ANSWER_DEADLINE_SECONDS", 60.0)
# How long `POST /turns` may take in all: answer rounds, enrichment and confide share it.
OPENBOT_TURN_DEADLINE_SECONDS = env_float("OPENBOT_TURN_DEADLINE_SECONDS", 60.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    # pika tells every step of every RabbitMQ connection at INFO (a dozen lines per /readyz).
    "loggers": {"pika": {"level": "WARNING"}},
}
# Failed authentication is logged with the client's address: REMOTE_ADDR, or behind this many
# proxies that each append to `X-Forwarded-For` the address they received from, the one the
# outermost of them saw. 0: the header is ignored (a client can write anything in it).
OPENBOT_TRUSTED_PROXY_COUNT = env_int("OPENBOT_TRUSTED_PROXY_COUNT", 0, minimum=0)
# A learning run's lease is one step plus this margin; the recovery pass runs this often.
OPENBOT_LEARNING_LEASE_MARGIN_SECONDS = env_float("OPENBOT_LEARNING_LEASE_MARGIN_SECONDS", 10.0)
OPENBOT_RECOVERY_SECONDS = env_float("OPENBOT_RECOVERY_SECONDS", 10.0)
# Threads of the in-process worker (OPENBOT_INPROCESS_WORKER). They share one SQLite
# writer with the request threads: too few, and learning falls behind a busy server.
OPENBOT_INPROCESS_WORKER_THREADS = env_int("OPENBOT_INPROCESS_WORKER_THREADS", 8, minimum=1)
# Workers blank the requests and results of model calls older than this, daily; unset:
# kept until a purge, a history deletion or `manage.py prune_model_calls`.
OPENBOT_MODEL_CALL_RETENTION_DAYS = env_days("OPENBOT_MODEL_CALL_RETENTION_DAYS")

DRAMATIQ_MIDDLEWARE = [
    "dramatiq.middleware.AgeLimit",
    "dramatiq.middleware.TimeLimit",
    "dramatiq.middleware.Callbacks",
    "dramatiq.middleware.Retries",
    "django_dramatiq.middleware.DbConnectionsMiddleware",
    "memorybot.worker.LearningRecovery",
]


def dramatiq_broker(url: str | None) -> dict:
    """Redis (redis://…) or RabbitMQ (amqp://…) when a URL is given, else in-process. On
    Redis, OPENBOT_BROKER_NAMESPACE prefixes every key, so that deployments (or test runs)
    sharing one Redis database never take each other's messages."""
    if not url:
        broker, options = "dramatiq.brokers.stub.StubBroker", {}
    elif url.startswith(("amqp://", "amqps://")):
        # Publisher confirms: a send returns once RabbitMQ holds the message, so a run is
        # noted as sent only then (unconfirmed, a message can be lost as its sender exits).
        broker = "dramatiq.brokers.rabbitmq.RabbitmqBroker"
        options = {"url": url, "confirm_delivery": True}
        if env_str("OPENBOT_BROKER_NAMESPACE"):
            raise ImproperlyConfigured(
                "OPENBOT_BROKER_NAMESPACE is for Redis: on RabbitMQ, give each deployment a"
                " virtual host of its own in OPENBOT_BROKER_URL"
            )
    elif url.startswith(("redis://", "rediss://", "unix://")):
        broker = "dramatiq.brokers.redis.RedisBroker"
        options = {"url": url, "namespace": env_str("OPENBOT_BROKER_NAMESPACE", "dramatiq")}
    else:
        raise ImproperlyConfigured(
            "OPENBOT_BROKER_URL must be a redis://, rediss:// or amqp(s):// URL"
        )
    return {"BROKER": broker, "OPTIONS": options, "MIDDLEWARE": DRAMATIQ_MIDDLEWARE}
