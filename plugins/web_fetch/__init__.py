"""The `web-fetch` plugin: one web page read for a model (fetch) and the gateway:web_fetch server tool (tool)."""
