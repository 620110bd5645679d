"""Production: PostgreSQL, a real broker, and no default for any secret."""

from settings.base import *  # noqa: F403
from settings.base import DATABASES, OPENBOT_ENCRYPTION_KEYS
from settings.env import env_bool, env_list, env_required, env_str

DEBUG = False
SECRET_KEY = env_required("SECRET_KEY")
if not OPENBOT_ENCRYPTION_KEYS:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("OPENBOT_ENCRYPTION_KEYS must be set in production [X1]")
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database in production")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or ["localhost"]
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True

# [O2] Redis (redis://…) or RabbitMQ (amqp://…); workers run `manage.py rundramatiq`.
_broker_url = env_required("OPENBOT_BROKER_URL")
_broker = (
    "dramatiq.brokers.rabbitmq.RabbitmqBroker"
    if _broker_url.startswith("amqp")
    else "dramatiq.brokers.redis.RedisBroker"
)
DRAMATIQ_BROKER = {
    "BROKER": _broker,
    "OPTIONS": {"url": _broker_url},
    "MIDDLEWARE": [
        "dramatiq.middleware.AgeLimit",
        "dramatiq.middleware.TimeLimit",
        "dramatiq.middleware.Callbacks",
        "dramatiq.middleware.Retries",
        "django_dramatiq.middleware.DbConnectionsMiddleware",
    ],
}
OPENBOT_INPROCESS_WORKER = env_bool("OPENBOT_INPROCESS_WORKER", False)
OPENBOT_SERVER_ID = env_str("OPENBOT_SERVER_ID", "server") or "server"
