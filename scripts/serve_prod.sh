#!/usr/bin/env bash
# [G3, F6] Production serving on one machine: nginx in front of gunicorn web workers, and
# `rundramatiq` worker processes, on PostgreSQL and Redis (or RabbitMQ), with the production
# settings.
#
#   scripts/serve_prod.sh     # or: make serve-prod [WEB=2] [WORKERS=2] [PORT=8000] [PROXY=nginx]
#
# Environment (defaults in brackets):
#   WEB [2], WEB_THREADS [4]          gunicorn worker processes and threads in each
#   WORKERS [2], WORKER_THREADS [4]   `rundramatiq` processes and threads in each
#   HOST [127.0.0.1], PORT [8000]     where the API listens (nginx, or gunicorn with PROXY=none)
#   PROXY [nginx]                     nginx in front of gunicorn (Debian's `nginx` package);
#                                     `none`: gunicorn alone, where a slow client can hold
#                                     every thread (it refuses to start without nginx otherwise)
#   DATABASE_URL [postgres://postgres@127.0.0.1:5432/openbot]  created if missing
#   OPENBOT_BROKER_URL [redis://127.0.0.1:6379/0]  or amqp://guest:guest@127.0.0.1:5672/%2F
#   SECRET_KEY, OPENBOT_ENCRYPTION_KEYS  a throwaway value each when unset (local use only)
#   ALLOWED_HOSTS [127.0.0.1,localhost], SECURE_SSL_REDIRECT [false: no TLS proxy locally]
#   PY [.venv/bin/python]
# Migrates first, then serves until Ctrl-C (or SIGTERM), which stops every process it started.
# A server that stops on its own (a `rundramatiq` whose worker process died, a gunicorn master,
# nginx) is started again, alone: the others keep serving [F6].
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
WEB=${WEB:-2}
WEB_THREADS=${WEB_THREADS:-4}
WORKERS=${WORKERS:-2}
WORKER_THREADS=${WORKER_THREADS:-4}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
PROXY=${PROXY:-nginx}

export DJANGO_SETTINGS_MODULE=settings.production
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/openbot}
export OPENBOT_BROKER_URL=${OPENBOT_BROKER_URL:-redis://127.0.0.1:6379/0}
export ALLOWED_HOSTS=${ALLOWED_HOSTS:-127.0.0.1,localhost}
export SECURE_SSL_REDIRECT=${SECURE_SSL_REDIRECT:-false}

case "$PROXY" in
  nginx)
    NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    if [ ! -x "$NGINX" ]; then
      echo "error: nginx is not installed (apt-get install nginx): it buffers requests in" \
        "front of gunicorn, so that slow clients cannot hold its threads. PROXY=none serves" \
        "with gunicorn alone." >&2
      exit 1
    fi
    # The app reads the client's address from the X-Forwarded-For nginx sets, and no other.
    export OPENBOT_TRUSTED_PROXY_COUNT=${OPENBOT_TRUSTED_PROXY_COUNT:-1}
    ;;
  none)
    echo "WARNING: PROXY=none: gunicorn faces clients alone; a few slow clients can hold" \
      "every one of its threads" >&2
    ;;
  *)
    echo "error: PROXY must be nginx or none" >&2
    exit 1
    ;;
esac

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

# Sockets, nginx's config, pid and buffers: a directory of this run's own.
RUN=$(mktemp -d "${TMPDIR:-/tmp}/openbot-serve.XXXXXX")
trap 'rm -rf "$RUN"' EXIT
if [ "$PROXY" = nginx ]; then
  WEB_BIND="unix:$RUN/web.sock"
  mkdir "$RUN/nginx"
  # As root, nginx would run its workers as `nobody`, which cannot reach gunicorn's socket.
  [ "$(id -u)" = 0 ] && user="user root;" || user=""
  cat >"$RUN/nginx/nginx.conf" <<EOF
$user
daemon off;
worker_processes auto;
# Stopping: requests in hand get as long as gunicorn's graceful stop.
worker_shutdown_timeout 30s;
pid $RUN/nginx/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $RUN/nginx/body;
    proxy_temp_path $RUN/nginx/proxy;
    fastcgi_temp_path $RUN/nginx/fastcgi;
    uwsgi_temp_path $RUN/nginx/uwsgi;
    scgi_temp_path $RUN/nginx/scgi;
    upstream openbot_web { server $WEB_BIND; }
    server {
        listen $HOST:$PORT;
        include $PWD/docs/deploy/openbot-proxy.conf;
    }
}
EOF
  nginx=("$NGINX" -p "$RUN/nginx" -e stderr -c "$RUN/nginx/nginx.conf")
  "${nginx[@]}" -t -q
else
  WEB_BIND="$HOST:$PORT"
fi

# supervise NAME STOP_SIGNAL COMMAND…: run COMMAND, and run it again each time it stops on its
# own, after a pause that doubles (1 s up to 30 s) while it keeps stopping within a minute of
# its start. On SIGTERM, stop it with STOP_SIGNAL (its graceful stop), kill what is left of it
# after 45 s, and end. Each command runs in a process group of its own (job control on):
# what a dead server leaves behind (worker processes whose master died) is killed with it.
supervise() {
  local name=$1 signal=$2 pid=0 pause=1 started status
  shift 2
  set -m
  trap 'trap "" TERM; server_stop "$pid" "$signal"; exit 0' TERM
  while true; do
    started=$SECONDS
    "$@" &
    pid=$!
    status=0
    wait "$pid" || status=$?
    kill -KILL -- "-$pid" 2>/dev/null || true
    if ((SECONDS - started >= 60)); then pause=1; fi
    echo "$(date '+%F %T') serve_prod: $name stopped (exit $status): starting it again" \
      "in $pause s" >&2
    sleep "$pause" &
    pid=$!
    wait "$pid" || true
    pause=$((pause < 16 ? pause * 2 : 30))
  done
}

# server_stop PID SIGNAL: ask the server to stop; after 45 s, kill its process group.
server_stop() {
  kill "-$2" "$1" 2>/dev/null || return 0
  for _ in $(seq 1 45); do
    kill -0 "$1" 2>/dev/null || break
    sleep 1
  done
  kill -KILL -- "-$1" 2>/dev/null || true
}

# The script itself runs in the foreground process group: Ctrl-C reaches only it, and it asks
# each supervisor once to stop its server (a second signal would make dramatiq kill its
# workers in the middle of a message).
set -m
supervisors=()
stop() {
  trap '' INT TERM
  echo "stopping..." >&2
  kill -TERM "${supervisors[@]}" 2>/dev/null || true
  wait || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

# gthread workers keep client connections alive; the timeout exceeds a turn's deadline
# (OPENBOT_TURN_DEADLINE_SECONDS, 60 s). No --preload: each worker builds its own app [G2].
# A search's `q` may hold 1,000 characters, 12 KB percent-encoded: longer than gunicorn's
# longest request line (8,190 bytes), so the line is not limited (0: up to 1 MB) and the app
# answers a 400 naming the field instead of gunicorn a bare 414.
supervise web TERM "$PY" -m gunicorn settings.wsgi:application \
  --workers "$WEB" --threads "$WEB_THREADS" --timeout 90 --graceful-timeout 30 \
  --keep-alive 5 --limit-request-line 0 --bind "$WEB_BIND" --no-control-socket &
supervisors+=($!)
# Explicit processes and threads: the defaults are one process per CPU and 8 threads.
supervise worker TERM "$PY" manage.py rundramatiq --processes "$WORKERS" \
  --threads "$WORKER_THREADS" --worker-shutdown-timeout 30000 &
supervisors+=($!)
if [ "$PROXY" = nginx ]; then
  # QUIT: nginx's graceful stop (TERM drops the requests in hand).
  supervise nginx QUIT "${nginx[@]}" &
  supervisors+=($!)
fi

echo "serving http://$HOST:$PORT/v1/ with $WEB gunicorn workers x $WEB_THREADS threads" \
  "${NGINX:+behind nginx }and $WORKERS rundramatiq processes x $WORKER_THREADS threads;" \
  "Ctrl-C stops them all" >&2
wait
