"""The OCR engine: pages without a text layer (scans) are read by a catalog model with image input, named by
the operator in FILE_PARSER_OCR_MODEL (any provider's vision model: the request's `pdf.engine` `mistral-ocr`
and `cloudflare-ai` both mean this engine). Each page's embedded images go in one call (at most
MAX_IMAGES_PER_PAGE); what the model answers is the page's text. The calls are priced at the endpoint's list
price and charged with the request (the stage's cost_usd)."""

from dataclasses import replace
from decimal import Decimal

from django.conf import settings

from gateway.billing.services import ReservationHandle
from gateway.errors import GatewayError
from plugins.common.documents.errors import FileRefused
from plugins.common.documents.pdf import PdfPage
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, ImagePart, Message, OutputMessage, TextPart
from routing.limits import RoutingLimit
from routing.pricing import usage_cost
from routing.selection import endpoints_for_request, unservable
from routing.side_calls import bound_for, call_hold, call_worst
from routing.stages import RequestContext

MAX_OCR_PAGES = 20  # per request: each page is one model call
OCR_OUTPUT_TOKENS = 4096  # a page's text at most (a call's output limit, and what its hold counts)
OCR_INSTRUCTIONS = (
    "You are an OCR engine. Transcribe all the text in the page image(s) exactly, in reading order. Use Markdown "
    "tables for tables. Answer with the transcription only, without comments; answer nothing if there is no text."
)
MSG_NOT_CONFIGURED = (
    "file-parser: pdf.engine '{engine}' (OCR) is not configured on this gateway (the operator names a vision "
    "model in FILE_PARSER_OCR_MODEL); use pdf.engine 'pdf-text' for PDFs with a text layer"
)
MSG_UNROUTABLE = "file-parser: the OCR model '{model}' cannot serve requests now; the file was not read"
MSG_NOT_SERVED = (
    "file-parser: the OCR model '{model}' is not served by this gateway ({why}); the file was not read, and "
    "retrying does not help: use pdf.engine 'pdf-text' for PDFs with a text layer"
)


MSG_TOO_MANY_SCANS = "more than {limit} scanned pages in the request for the OCR engine"


def ocr_max_pages() -> int:
    return MAX_OCR_PAGES


def ocr_model() -> str:
    """The catalog model id of the OCR engine, or "" when this gateway has none."""
    return str(getattr(settings, "FILE_PARSER_OCR_MODEL", "") or "")


def ocr_require(engine: str) -> str:
    """The OCR model, or a 400 saying the engine asked for is not configured."""
    model = ocr_model()
    if not model:
        raise GatewayError(MSG_NOT_CONFIGURED.format(engine=engine), status=400)
    return model


class OcrEngine:
    """One request's OCR calls: the pages read, what they cost, and (with `ctx`) each call's hold, taken before it
    runs (routing.side_calls.call_hold: the credits, the key's limit, the guardrail budgets; refused: the file is
    not read, 402 / 403) and handed on by the stage (the request's own hold takes them over)."""

    def __init__(self, model: str, limits: tuple[RoutingLimit, ...] = (), ctx: RequestContext | None = None):
        self.model = model
        self.limits = limits  # the caller's guardrails: the pages go only where the caller's text may
        self.ctx = ctx
        self.pages = 0
        self.cost = Decimal(0)
        self.holds: list[ReservationHandle] = []

    def read(self, page: PdfPage, *, name: str) -> str:
        if not page.images:
            raise FileRefused(name, f"page {page.number} has no text layer and no image the OCR engine can read")
        if self.pages >= ocr_max_pages():
            raise FileRefused(name, MSG_TOO_MANY_SCANS.format(limit=ocr_max_pages()))
        self.pages += 1
        try:
            plan = endpoints_for_request(models=[self.model], limits=self.limits)
        except GatewayError as error:
            if error.status == 403:  # the caller's guardrails allow the OCR model no endpoint: say so
                raise
            # this deployment's configuration (no endpoint, no credential): a retry cannot help
            message = MSG_NOT_SERVED.format(model=self.model, why=error.message)
            raise unservable(message, models=[self.model], cause=error) from None
        probe = CanonicalRequest(
            model="",
            instructions=OCR_INSTRUCTIONS,
            input=(
                Message(
                    role="user",
                    content=(TextPart(f"Page {page.number} of {name}"), *(ImagePart(url=url) for url in page.images)),
                ),
            ),
            temperature=0,
            max_output_tokens=OCR_OUTPUT_TOKENS,
        )
        if self.ctx is not None:
            hold = call_hold(self.ctx, call_worst(plan, probe), label="file-parser OCR")
            if isinstance(hold, GatewayError):  # the credits or a budget cannot cover the page: it is not sent
                raise hold
            self.holds.append(hold)
        sequence = AttemptSequence(
            candidates=plan.candidates,
            request_for=lambda candidate: replace(probe, model=candidate.endpoint.upstream_model),
            bound_usage=bound_for(probe),  # at most what its hold counted
        )
        try:
            served = sequence.call()
        except AttemptsFailed:
            raise GatewayError(MSG_UNROUTABLE.format(model=self.model), status=503) from None
        self.cost += usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
        return "".join(item.text for item in served.response.output if isinstance(item, OutputMessage)).strip()
