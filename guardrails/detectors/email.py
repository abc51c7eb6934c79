"""The `email` builtin: the candidate pattern alone decides."""

from guardrails.detectors.base import NON_ASCII, Builtin, confirm_as_is

# Dot-atoms (RFC 5322) where any non-ASCII character counts as a letter (RFC 6531 addresses): a plain code-point
# range keeps RE2's DFA small, where Unicode letter classes (\pL) make it several times slower.
EMAIL = Builtin(
    "email",
    rf"[\w.%+'\-{NON_ASCII}]+@[\w\-{NON_ASCII}]+(?:\.[\w\-{NON_ASCII}]+)*"
    rf"\.(?:[A-Za-z]{{2,}}|[{NON_ASCII}]{{2,}})",
    confirm_as_is,
    ("re2",),
)
