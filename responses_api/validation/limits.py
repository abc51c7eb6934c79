"""Count and size limits of a Responses request, checked before any per-item work.

Each is far above what a real conversation or tool set needs, and low enough that validating a body at
the limit costs milliseconds. They are documented in docs/limits-and-hardening.md ("Input").
"""

from gateway.parsers import DEFAULT_MAX_DEPTH

MAX_JSON_DEPTH = DEFAULT_MAX_DEPTH  # 64: deeper is a 400 from the JSON parser, on every endpoint
MAX_INPUT_ITEMS = 10_000  # `input` items; a long agent session with tool calls stays in the low thousands
MAX_CONTENT_PARTS = 1_000  # content parts of one message (providers accept at most a few hundred images)
MAX_TOOLS = 512  # `tools` entries (OpenAI accepts 128 functions; deferred tool search needs more)
MAX_PLUGINS = 16  # `plugins` entries (there are ten plugin ids)
