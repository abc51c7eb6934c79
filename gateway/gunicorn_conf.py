"""gunicorn settings of the gateway: `gunicorn -c python:gateway.gunicorn_conf gateway.wsgi:application`.

scripts/run.sh and the live tests (tests/live.py) both start gunicorn with this file; command-line flags
override it. Environment: WEB_CONCURRENCY (worker processes), GUNICORN_THREADS (threads per worker).

Limits on what reaches the application (a reverse proxy in front should be at least as strict; see the
README): the request line (method + URL) at most 8190 bytes (414 above), at most 100 header fields of at
most 8190 bytes each (431 above). Bodies are limited and given a deadline by the application
(gateway/middleware.py: MAX_REQUEST_BODY_BYTES, REQUEST_BODY_TIMEOUT_SECONDS).
"""

import os

wsgi_app = "gateway.wsgi:application"
# gthread, answering protocol errors (malformed requests gunicorn refuses itself) in the JSON error body.
worker_class = "gateway.gunicorn_worker.JsonErrorThreadWorker"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("GUNICORN_THREADS", "256"))
timeout = 120
graceful_timeout = 10
keepalive = 5

limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
