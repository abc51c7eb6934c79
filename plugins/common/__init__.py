"""What the plugins share (not a plugin itself, and it imports none): the plugin settings (config), the caller's limits
and preferences for a plugin's own model calls (caller), the provider-run tools' stage and endpoint check
(hosted_tools), URL domain patterns (domains), bounded json-repair (repair), and the server tools' registry and loop
(tools, tool_loop)."""
