"""The moderation plugin: the pre-stage (stage) and its engines (engines)."""
