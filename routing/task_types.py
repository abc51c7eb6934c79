"""The task types the routers know (plugins/routers/): a model's `task_scores` are keyed by these, the
auto-router classifies a request into one of them. `general` is what a request nothing else fits is."""

TASK_TYPES = (
    "coding",
    "math",
    "reasoning",
    "writing",
    "summarization",
    "translation",
    "extraction",
    "classification",
    "chat",
    "roleplay",
    "data_analysis",
    "agentic",
    "vision",
    "question_answering",
    "general",
)
