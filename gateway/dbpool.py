"""A cursor for the hot path's fixed statements (a request's hold and its settlement) that PostgreSQL prepares.

Django's cursors bind parameters on the client (its default, kept for the ORM: some ORM queries cannot be bound on
the server) and psycopg never prepares a statement bound that way. This cursor is psycopg's own `Cursor`, which
binds them on the server, on Django's connection and in Django's wrapper (errors, query logging, execute wrappers):
psycopg prepares its statement as the settings' `prepare_threshold` says (OPTIONS; DB_PREPARED_STATEMENTS), so
PostgreSQL parses and plans it once per connection. A statement must then be one statement."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper
from psycopg import Cursor


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """A server-binding cursor on Django's connection (opened as Django's own `cursor()` opens it: from the pool,
    refused inside an atomic block whose connection was closed); Django's ordinary cursor where nothing is
    prepared (SQLite; PostgreSQL with prepare_threshold unset, behind a pooler that cannot keep prepared
    statements)."""
    db = connections[DEFAULT_DB_ALIAS]  # once: each `connection.x` looks the connection up again
    if db.vendor != "postgresql" or db.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        with db.cursor() as cursor:
            yield cursor
        return
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    with db.wrap_database_errors:
        raw = Cursor(db.connection)
    wrap = db.make_debug_cursor if db.queries_logged else db.make_cursor  # what Django's own cursor() does
    with wrap(raw) as wrapped:  # type: ignore[arg-type]  # (django-stubs types its argument as the wrapper)
        yield wrapped
