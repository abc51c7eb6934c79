"""What a credit hold must cover on one candidate endpoint, at list price (pure): the worst case of the request's
first call, the provider's own web searches and the server-tool loop's later rounds. gateway.billing.fees.hold_amount
takes the worst over the candidates, with the BYOK fee on a key."""

from decimal import Decimal

from routing.canonical import CanonicalRequest
from routing.catalog import EndpointInfo
from routing.output_bound import output_allowance
from routing.pricing import max_cost
from routing.providers.hosted import searches_bound
from routing.stages import SERVER_TOOL_RESULT_TOKENS


def hold_list_cost(
    *, endpoint: EndpointInfo, request: CanonicalRequest, estimated_input_tokens: int, server_rounds: int
) -> Decimal:
    searches = searches_bound(request.hosted_tools)
    output = output_allowance(request, endpoint).held  # a cut answer is billed as much
    cost = max_cost(endpoint=endpoint, input_tokens=estimated_input_tokens, max_output_tokens=output)
    # The provider's own web searches: the most each call may make (the provider is told), every round.
    cost += searches * endpoint.price_web_search * server_rounds
    # The server-tool loop's later rounds: each round's input is the last one's plus its output and a tool
    # result at most (up to the endpoint's context), so the hold covers every round the loop may make.
    for done in range(1, server_rounds):
        grown = estimated_input_tokens + done * (output + SERVER_TOOL_RESULT_TOKENS)
        grown = min(grown, endpoint.context_length or grown)
        cost += max_cost(endpoint=endpoint, input_tokens=grown, max_output_tokens=output)
    return cost
