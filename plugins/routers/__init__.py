"""The router slugs gateway/auto, gateway/auto-beta and gateway/pareto-code (stage; auto, pareto, their candidates and
the task classifier); gateway/fusion is the fusion plugin's, registered into the router stage by plugins.registry."""
