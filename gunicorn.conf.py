"""gunicorn reads ./gunicorn.conf.py when started without -c (e.g. `gunicorn gateway.wsgi:application` from
the checkout): the project's settings then apply too. They live in gateway/gunicorn_conf.py."""

from gateway.gunicorn_conf import *  # noqa: F403
