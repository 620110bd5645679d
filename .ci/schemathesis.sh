#!/usr/bin/env bash
# [A13] Serve the API (gunicorn, settings.dev, a fresh SQLite database), create a token and
# real ids, and run schemathesis over every operation of /v1/schema: >= 50 examples each,
# every check. Exits non-zero on any failure; prints schemathesis' summary.
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

export DJANGO_SETTINGS_MODULE=settings.dev
export DATABASE_URL="sqlite:///$work/db.sqlite3"
export OPENBOT_SLOT_DIR="$work/slots"
# [T1] Schemathesis sends thousands of requests a minute with one token: no limits here.
export OPENBOT_THROTTLE_TOKEN=off OPENBOT_THROTTLE_WRITES=off OPENBOT_THROTTLE_AUTH_FAILURES=off
port="$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"

.venv/bin/python manage.py migrate --noinput -v0 2>/dev/null
.venv/bin/python manage.py bootstrap > "$work/demo.json" 2>/dev/null

# --limit-request-line 0 as scripts/serve_prod.sh: a schema-valid search `q` is up to 12 KB.
.venv/bin/gunicorn settings.wsgi -b "127.0.0.1:$port" -w 1 --threads 4 --timeout 120 --limit-request-line 0 \
  --error-logfile "$work/server.log" --access-logfile /dev/null >>"$work/server.log" 2>&1 &
server=$!

# The demo's ids, one chat and one entry of its admin's, made through the API itself.
eval "$(.venv/bin/python - "$work/demo.json" "$base" <<'PY'
import json, sys, time, urllib.request

demo = json.load(open(sys.argv[1]))
base = sys.argv[2]
headers = {"Authorization": f"Bearer {demo['token']}", "Content-Type": "application/json"}


def call(path, body):
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


for _ in range(100):
    try:
        urllib.request.urlopen(base + "/v1/schema", timeout=5).close()
        break
    except OSError:
        time.sleep(0.2)
memory = f"/v1/bots/{demo['bot']}/memory"
entry, _ = (call(memory, {"command": {"_tag": "Remember", "content": w}}) for w in ("tea", "cake"))
# Two turns that the entries enrich: every list of the chat holds two rows [A16].
chat = call("/v1/chats", {"bot": demo["bot"]})
for text in ("I like green tea.", "Green tea or black tea?"):
    call(f"/v1/chats/{chat['id']}/turns", {"text": text})


def next_cursor(path):
    request = urllib.request.Request(base + path, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        cursor = json.load(response)["nextCursor"]
    assert cursor, f"{path}: one row, no next page"
    return cursor


print(f"export OPENBOT_SCHEMA_TOKEN={demo['token']}")
print(f"export OPENBOT_SCHEMA_ORG={demo['organization']}")
print(f"export OPENBOT_SCHEMA_BOT={demo['bot']}")
print(f"export OPENBOT_SCHEMA_CHAT={chat['id']}")
print(f"export OPENBOT_SCHEMA_ENTRY={entry['id']}")
print(f"export OPENBOT_SCHEMA_CURSOR={next_cursor(memory + '?limit=1')}")
print(f"export OPENBOT_SCHEMA_LOG_CURSOR={next_cursor(memory + '/log?limit=1')}")
for name in ("items", "confessions", "enrichments", "learning"):
    cursor = next_cursor(f"/v1/chats/{chat['id']}/{name}?limit=1")
    print(f"export OPENBOT_SCHEMA_{name.upper()}_CURSOR={cursor}")
PY
)"

# `DELETE /v1/chats/:chatId/items` empties the chat's history, a collection [C4, P3]: the chat
# stays, and `GET …/items` answers 200 with `{"items": []}` afterwards, as a collection emptied
# by DELETE does. schemathesis' use-after-free check (ST301) reads every DELETE that has a path
# parameter as deleting one resource and wants that read to be a 404 (it spares only a DELETE
# without path parameters as a collection), so it misreads ours. It is the one check left out,
# for the whole run: `--checks all` on the command line overrides a per-operation switch in the
# config file. The check only looks at reads after a DELETE, and that DELETE is our only one:
# a new DELETE route stops this script until someone decides whether the check applies to it.
deletes="$(.venv/bin/python - "$base" <<'PY'
import json, sys, urllib.request

with urllib.request.urlopen(sys.argv[1] + "/v1/schema?format=json", timeout=30) as response:
    paths = json.load(response)["paths"]
print(" ".join(sorted(o["operationId"] for p in paths.values() for m, o in p.items() if m == "delete")))
PY
)"
if [ "$deletes" != "chat_items_delete" ]; then
  echo "DELETE operations are now: $deletes; is use_after_free still misreading them all?" >&2
  exit 1
fi

status=0
# [E9] The hooks generate what the schema's `topic` format means (see the file).
SCHEMATHESIS_HOOKS=.ci/schemathesis_hooks.py \
  .venv/bin/schemathesis --config-file .ci/schemathesis.toml run "$base/v1/schema?format=json" \
  --url "$base" -H "Authorization: Bearer $OPENBOT_SCHEMA_TOKEN" \
  --checks all --exclude-checks use_after_free --max-examples 50 --no-color \
  --generation-database none > "$work/schemathesis.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then cat "$work/schemathesis.log"; echo "== server log"; tail -50 "$work/server.log"; fi
# The summary: operations, phases, checks, counts, and its last line.
sed -n '/SUMMARY/,$p' "$work/schemathesis.log"
exit "$status"
