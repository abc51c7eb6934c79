"""`make run` (scripts/run.sh): the production settings plus the local stand-in provider (routing/standin/), whose
`manage.py standin_provider` answers beside the gateway so that a request gets an answer with no provider key."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "routing.standin"]
