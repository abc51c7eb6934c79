# The gateway image: gunicorn with gateway/gunicorn_conf.py, static files collected at build, a non-root user.
#   docker build -t model-gateway .
#   docker run --env-file .env -p 8000:8000 model-gateway
# Configuration is the environment (.env.example); migrations run once per release (compose.yaml: `migrate`).
# Run the stale-hold sweep every few minutes from one place, with the same image and environment (compose.yaml:
# `holds`; elsewhere cron or a scheduled job), e.g.
#   */5 * * * *  docker run --rm --env-file .env model-gateway python manage.py release_stale_reservations
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=gateway.settings.base

RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /app --shell /usr/sbin/nologin gateway \
    && python -m venv /opt/venv

WORKDIR /app
# Dependencies first, exactly as locked (requirements.lock: every package pinned with its hashes; `make lock`
# updates it), a layer reused while only the code changes; then the code, installed in place without dependencies
# and with the locked setuptools.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY . .
RUN pip install --no-deps --no-build-isolation -e . \
    && SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && python -m compileall -q gateway responses_api byok routing plugins guardrails \
    && chmod -R a+rX /app

USER gateway:gateway
EXPOSE 8000
# Per-worker metric files (prometheus multiprocess mode) go to a fresh directory under /tmp (gunicorn_conf.py).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"
CMD ["gunicorn", "-c", "python:gateway.gunicorn_conf", "gateway.wsgi:application", "--bind", "0.0.0.0:8000"]
