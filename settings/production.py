"""Production: PostgreSQL, a real broker, and no default for any secret."""

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from settings.base import *  # noqa: F403
from settings.base import DATABASES, MIDDLEWARE, OPENBOT_ENCRYPTION_KEYS, dramatiq_broker
from settings.env import env_bool, env_float, env_list, env_required, env_str

DEBUG = False
SECRET_KEY = env_required("SECRET_KEY")
if not OPENBOT_ENCRYPTION_KEYS:
    raise ImproperlyConfigured("OPENBOT_ENCRYPTION_KEYS must be set in production [X1]")
for _position, _key in enumerate(OPENBOT_ENCRYPTION_KEYS, start=1):
    try:
        Fernet(_key)
    except ValueError:
        # [X1] Refuse at start, not at the first read; never echo the key itself.
        raise ImproperlyConfigured(
            f"OPENBOT_ENCRYPTION_KEYS: key {_position} is not a Fernet key "
            "(32 url-safe base64-encoded bytes)"
        ) from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database in production")
# [G3] Each gunicorn and worker thread keeps its connection between requests (checked before
# reuse) rather than opening one per request, which about doubled a small read's time under load.
DATABASES["default"]["CONN_MAX_AGE"] = round(env_float("DATABASE_CONN_MAX_AGE", 60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or ["localhost"]
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

# Static files (the docs UI's bundled assets, the admin's): `manage.py collectstatic`
# gathers them into STATIC_ROOT once per release, compressed and with hashed names that
# browsers may cache for ever; WhiteNoise serves them from there, so gunicorn alone serves
# /v1/docs whole. (Development's runserver serves them from the apps without either.)
MIDDLEWARE = [
    *MIDDLEWARE[: MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1],
    "whitenoise.middleware.WhiteNoiseMiddleware",
    *MIDDLEWARE[MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1 :],
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# Probes ask over plain HTTP, from inside, and need their answer rather than a redirect.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True

# [O2] Redis (redis://…) or RabbitMQ (amqp://…); workers run `manage.py rundramatiq`.
DRAMATIQ_BROKER = dramatiq_broker(env_required("OPENBOT_BROKER_URL"))
OPENBOT_INPROCESS_WORKER = env_bool("OPENBOT_INPROCESS_WORKER", False)
OPENBOT_SERVER_ID = env_str("OPENBOT_SERVER_ID", "server") or "server"
