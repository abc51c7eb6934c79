"""The server-tool loop's stage (stage: the loop itself is plugins.common.tool_loop) and the tools every request may use
(tools)."""
