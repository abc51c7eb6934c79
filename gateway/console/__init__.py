"""The staff console and operations: the admin dashboard, GET /activity, /metrics and the request log lines."""
