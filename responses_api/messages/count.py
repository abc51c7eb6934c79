"""POST /messages/count_tokens: Anthropic's token count, by the gateway's own estimate.

No tokenizer ships with the gateway's runtime dependencies (tiktoken and the Anthropic tokenizer file come only
with the development tools), and nothing may be downloaded at run time, so the count is the estimate every hold
is made from (responses_api.normalize.estimate_tokens: 4 characters a token, 1,000 an image): the number the
gateway itself reserves credits for, not the provider's exact count."""

from responses_api.messages.translate import responses_data
from responses_api.messages.validation import MessageCreateRequestSerializer
from responses_api.normalize import prepare


class MessageCountTokensRequestSerializer(MessageCreateRequestSerializer):
    """The fields Anthropic's count_tokens takes: the request's prompt without its generation options (any other
    field, `max_tokens` or `stream` included, is a 400 naming it, as Anthropic's API answers)."""

    max_tokens = None  # type: ignore[assignment]  # removes the inherited field (DRF's documented way)
    models = None  # type: ignore[assignment]
    stream = None  # type: ignore[assignment]
    temperature = None  # type: ignore[assignment]
    top_p = None  # type: ignore[assignment]
    top_k = None  # type: ignore[assignment]
    stop_sequences = None  # type: ignore[assignment]
    metadata = None  # type: ignore[assignment]
    service_tier = None  # type: ignore[assignment]
    session_id = None  # type: ignore[assignment]
    provider = None  # type: ignore[assignment]
    plugins = None  # type: ignore[assignment]
    route = None  # type: ignore[assignment]
    debug = None  # type: ignore[assignment]


def message_tokens_count(*, message: dict, account_id: str) -> int:
    """The estimated input tokens of a validated count_tokens request, as its /messages request's hold counts them."""
    data = responses_data({**message, "max_tokens": None})
    return prepare(data=data, account_id=account_id).estimated_input_tokens
