"""Named version counters: a change anywhere bumps one, and every process sees it within
CACHE_VERSION_CHECK_SECONDS, so in-process caches (API keys, the catalog) need no query per request."""
