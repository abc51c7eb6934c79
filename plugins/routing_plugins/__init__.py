"""The router plugins' parts (plugins.routers is the pipeline stage): the task classifier, the candidate models
and their quality data, the auto and pareto routers, and fusion."""
