"""Web search and fetch: engines (engines.py), page fetching (fetch.py), domain filters (domains.py). The public
interface is plugins.web_engines."""
