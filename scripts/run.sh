#!/usr/bin/env bash
# Set up the embedded default (SQLite, local-memory cache) and run the gateway with gunicorn.
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p .run
if [ ! -f .run/secrets.env ]; then
  python - > .run/secrets.env <<'PY'
import base64, secrets
print(f"SECRET_KEY={secrets.token_urlsafe(50)}")
print(f"GATEWAY_ENCRYPTION_KEYS=k1:{base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}")
PY
  chmod 600 .run/secrets.env
fi
set -a; . .run/secrets.env; set +a
# The production settings plus the local stand-in provider's app (its `manage.py standin_provider` below).
export DJANGO_SETTINGS_MODULE=gateway.settings.dev
PORT="${PORT:-8000}"

STANDIN_PORT="${STANDIN_PORT:-9100}"
export STANDIN_API_KEY="${STANDIN_API_KEY:-standin-local-key}"
for slug in CHAT RESPONSES ANTHROPIC; do
  export "GATEWAY_PROVIDER_STANDIN_${slug}_BASE_URL=http://127.0.0.1:${STANDIN_PORT}/v1"
done

python manage.py migrate --noinput >/dev/null
python manage.py load_catalog routing/catalog/default.yaml routing/catalog/standin.yaml

# The local stand-in provider (not a real provider) beside the gateway; stopped with it.
python manage.py standin_provider --port "${STANDIN_PORT}" &
standin_pid=$!
trap 'kill ${standin_pid} 2>/dev/null || true' EXIT INT TERM
echo "== Demo account (the keys are shown only now) =="
python manage.py create_account --name demo --credits 20 --reuse --text | tee .run/demo-keys.txt
chmod 600 .run/demo-keys.txt
mk=$(awk '/^Management key:/ {print $3}' .run/demo-keys.txt)
echo
echo "Try: curl -H \"Authorization: Bearer ${mk}\" http://127.0.0.1:${PORT}/api/v1/credits"
echo
# Workers, threads, timeouts, request limits and the JSON protocol-error worker: gateway/gunicorn_conf.py
# (WEB_CONCURRENCY, GUNICORN_WORKER_CLASS, GUNICORN_WORKER_CONNECTIONS and GUNICORN_THREADS still apply).
gunicorn -c python:gateway.gunicorn_conf gateway.wsgi:application --bind "127.0.0.1:${PORT}"
