"""The `regex-prompt-injection` builtin: well-known injection phrases and chat-template markers; the pattern
alone decides."""

from guardrails.detectors.base import Builtin, confirm_as_is

_PROMPT_INJECTION = (
    r"(?i)(?:"
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*"
    r"(?:previous|prior|above|earlier|preceding|original|initial|system)\s+"
    r"(?:instructions?|prompts?|rules|directions|guidelines|directives|messages?)\b"
    r"|\b(?:reveal|print|show|repeat|output|leak|tell\s+me)\s+(?:me\s+)?(?:your|the)\s+"
    r"(?:system\s+prompt|hidden\s+(?:instructions?|prompt)|initial\s+(?:instructions?|prompt)|instructions\s+above)\b"
    r"|\byou\s+are\s+now\s+(?:DAN|in\s+developer\s+mode|jailbroken|unrestricted|unfiltered)\b"
    r"|\b(?:DAN|developer)\s+mode\s+(?:enabled|activated|on)\b"
    r"|\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:have|had)\s+no\s+(?:rules|restrictions|guidelines)"
    r"|an?\s+(?:unrestricted|unfiltered|uncensored)\s+(?:ai|assistant|model))\b"
    r"|<\|im_start\|>\s*system|<\|system\|>|\[/?INST\]|<<SYS>>"
    r")"
)

PROMPT_INJECTION = Builtin("regex-prompt-injection", _PROMPT_INJECTION, confirm_as_is, ("re2",))
