"""The `web` plugin (search results added to the context, url_citation annotations on the answer: stage), the search
engines (search) and the gateway:web_search server tool (tool)."""
