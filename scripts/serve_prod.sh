#!/usr/bin/env bash
# [G3] Production serving on one machine: gunicorn web workers and `rundramatiq` worker
# processes on PostgreSQL and Redis (or RabbitMQ), with the production settings.
#
#   scripts/serve_prod.sh                 # or: make serve-prod [WEB=2] [WORKERS=2] [PORT=8000]
#
# Environment (defaults in brackets):
#   WEB [2], WEB_THREADS [4]          gunicorn worker processes and threads in each
#   WORKERS [2], WORKER_THREADS [4]   `rundramatiq` processes and threads in each
#   HOST [127.0.0.1], PORT [8000]     where gunicorn listens
#   DATABASE_URL [postgres://postgres@127.0.0.1:5432/openbot]  created if missing
#   OPENBOT_BROKER_URL [redis://127.0.0.1:6379/0]  or amqp://guest:guest@127.0.0.1:5672/%2F
#   SECRET_KEY, OPENBOT_ENCRYPTION_KEYS  a throwaway value each when unset (local use only)
#   ALLOWED_HOSTS [127.0.0.1,localhost], SECURE_SSL_REDIRECT [false: no TLS proxy locally]
#   PY [.venv/bin/python]
# Migrates first, then serves until Ctrl-C (or SIGTERM), which stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
WEB=${WEB:-2}
WEB_THREADS=${WEB_THREADS:-4}
WORKERS=${WORKERS:-2}
WORKER_THREADS=${WORKER_THREADS:-4}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}

export DJANGO_SETTINGS_MODULE=settings.production
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/openbot}
export OPENBOT_BROKER_URL=${OPENBOT_BROKER_URL:-redis://127.0.0.1:6379/0}
export ALLOWED_HOSTS=${ALLOWED_HOSTS:-127.0.0.1,localhost}
export SECURE_SSL_REDIRECT=${SECURE_SSL_REDIRECT:-false}

if [ -z "${SECRET_KEY:-}" ]; then
  SECRET_KEY=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')
  export SECRET_KEY
  echo "warning: SECRET_KEY is not set: using a throwaway one for this run (local use only)" >&2
fi
if [ -z "${OPENBOT_ENCRYPTION_KEYS:-}" ]; then
  OPENBOT_ENCRYPTION_KEYS=$("$PY" -c \
    'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')
  export OPENBOT_ENCRYPTION_KEYS
  # [X1] Content written under this key is unreadable once it is gone: say how to keep it.
  echo "warning: OPENBOT_ENCRYPTION_KEYS is not set: using a throwaway key for this run" \
    "(local use only); to read this data after a restart, export" \
    "OPENBOT_ENCRYPTION_KEYS=$OPENBOT_ENCRYPTION_KEYS" >&2
fi

"$PY" -c 'import os, bench.__main__ as b; b.database_ensure(os.environ["DATABASE_URL"])'
"$PY" manage.py migrate --noinput -v0
"$PY" manage.py collectstatic --noinput -v0  # [A13] the docs' and the admin's assets

# Each server runs as a job in a process group of its own (job control on), so Ctrl-C reaches
# only this script, which asks each of them once to stop gracefully: a second signal would
# make dramatiq kill its workers in the middle of a message.
set -m
children=()
stop() {
  trap '' INT TERM
  echo "stopping..." >&2
  kill -TERM "${children[@]}" 2>/dev/null || true
  # Requests and messages in hand may finish (dramatiq waits up to its shutdown timeout).
  for _ in $(seq 1 45); do
    kill -0 "${children[@]}" 2>/dev/null || break
    sleep 1
  done
  for child in "${children[@]}"; do kill -KILL -- "-$child" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

# gthread workers keep client connections alive; the timeout exceeds a turn's deadline
# (OPENBOT_TURN_DEADLINE_SECONDS, 60 s). No --preload: each worker builds its own app [G2].
# A search's `q` may hold 1,000 characters, 12 KB percent-encoded: longer than gunicorn's
# longest request line (8,190 bytes), so the line is not limited (0: up to 1 MB) and the app
# answers a 400 naming the field instead of gunicorn a bare 414.
"$PY" -m gunicorn openbot.wsgi:application \
  --workers "$WEB" --threads "$WEB_THREADS" --timeout 90 --graceful-timeout 30 \
  --keep-alive 5 --limit-request-line 0 --bind "$HOST:$PORT" --no-control-socket &
children+=($!)
# Explicit processes and threads: the defaults are one process per CPU and 8 threads.
"$PY" manage.py rundramatiq --processes "$WORKERS" --threads "$WORKER_THREADS" \
  --worker-shutdown-timeout 30000 &
children+=($!)

echo "serving http://$HOST:$PORT/v1/ with $WEB gunicorn workers x $WEB_THREADS threads and" \
  "$WORKERS rundramatiq processes x $WORKER_THREADS threads; Ctrl-C stops them all" >&2
# Serve until a signal, or until one of them stops on its own (then stop the other too).
status=0
wait -n || status=$?
echo "a server process stopped (exit $status): stopping the rest" >&2
stop
exit 1
