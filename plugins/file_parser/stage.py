"""file-parser: `input_file` parts become text the model can read, before routing.

It runs by itself when a file goes to a model whose catalog `input_modalities` lack `file` (any of the requested
models: a fallback model must be able to read the request too), and always when the request's plugin entry names
a PDF engine (`pdf.engine`): `pdf-text` (the text layer, read here by pypdf), `mistral-ocr` / `cloudflare-ai`
(the text layer where there is one, else the OCR engine: a vision model named by FILE_PARSER_OCR_MODEL), or
`native` (the file goes to the provider as it is: 400 when no requested model accepts files). With no engine
named, PDFs are read from their text layer, and scanned pages by the OCR engine when it is configured. An entry
with `enabled: false` turns the parsing off (the file then goes to the provider as it is).

Each parsed file becomes one text part (its name first) carrying the file's annotation; FileAnnotationStage puts
those annotations on the answer's first output_text part. A file whose annotation the caller sent back (in an
assistant message, found by the sha256 of its bytes) is not parsed again: the annotation's text is used.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal

from gateway.billing.services import ReservationHandle, hold_drop
from gateway.errors import GatewayError
from plugins.common.config import plugin_mentioned, plugin_settings
from plugins.common.documents.errors import FileRefused
from plugins.common.documents.loaded import LoadedFile
from plugins.common.documents.pdf import OutOfTime
from plugins.common.documents.sandbox import PdfRead, pdf_read
from plugins.file_parser import annotations, sources
from plugins.file_parser.ocr import MSG_TOO_MANY_SCANS, OcrEngine, ocr_max_pages, ocr_model, ocr_require
from plugins.file_parser.sources import file_load, file_name
from plugins.file_parser.text import text_of
from routing.canonical import CanonicalRequest, CanonicalResponse, FilePart, Message, OutputMessage, TextPart
from routing.limits import RoutingLimit, limits_for
from routing.selectors import model_get
from routing.stages import Block, RequestContext, Restaged, Staged, StageEntry

PLUGIN_ID = "file-parser"
PARSE_SECONDS = 10.0  # one request's parsing budget (all its files): a PDF reader still at work at its end is killed
OCR_ENGINES = ("mistral-ocr", "cloudflare-ai")
MSG_NATIVE = (
    "file-parser: pdf.engine 'native' sends files to the provider as they are, but none of the requested models "
    "accepts file input; choose 'pdf-text' or an OCR engine"
)
MSG_OUT_OF_TIME = "input_file '{name}': parsing took longer than {seconds:g} s (the request's files together)"
MSG_NO_TEXT_LAYER = "the PDF has no text layer (scanned pages) and the OCR engine is not configured on this gateway"
MSG_NOTHING_READ = (
    "no text could be read from the PDF (its scanned pages hold no image the OCR engine can send: JPEG, or 8-bit "
    "grey or RGB)"
)
MSG_TEXT_LAYER_ONLY = "the PDF has no text layer (scanned pages); pdf.engine 'pdf-text' reads only that"


@dataclass
class _Tally:
    """What this request's parsing did: for the pipeline entry and the generation record."""

    files: int = 0
    pages: int = 0
    reused: int = 0
    engines: list[str] = field(default_factory=list)
    pdf_seconds: float = 0.0

    def used(self, engine: str) -> None:
        if engine not in self.engines:
            self.engines.append(engine)


class FileParserStage:
    type = "request_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        if not any(True for _ in _file_parts(request)):
            return Staged(request=request)
        options = plugin_settings(ctx, PLUGIN_ID)
        if options is None and plugin_mentioned(ctx, PLUGIN_ID):  # `enabled: false`
            return Staged(request=request)
        engine = ((options or {}).get("pdf") or {}).get("engine")
        accepts = _models_accept_files(ctx.models)
        if engine == "native":
            if not any(accepts):
                return Block(MSG_NATIVE, status=400)
            return _staged(request, _Tally(files=sum(1 for _ in _file_parts(request)), engines=["native"]))
        if engine is None and accepts and all(accepts):
            return Staged(request=request)  # every requested model reads files itself
        return _parse_all(request, engine, limits_for(ctx.caller), ctx)


class FileAnnotationStage:
    """Puts the annotations of the files the request's input turned into text on the answer's first
    output_text part (a streamed answer is then relayed once complete)."""

    type = "response_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def wants(self, ctx: RequestContext) -> bool:
        return ctx.request is not None and bool(annotations.for_answer(ctx.request))

    def __call__(self, response: CanonicalResponse, ctx: RequestContext) -> CanonicalResponse | Restaged:
        assert ctx.request is not None
        found = annotations.for_answer(ctx.request)
        index = next((i for i, item in enumerate(response.output) if isinstance(item, OutputMessage)), None)
        if index is None:  # no text answer (a function call only): nothing carries them
            return response
        output = list(response.output)
        message = output[index]
        assert isinstance(message, OutputMessage)
        output[index] = replace(message, annotations=message.annotations + found)
        return Restaged(response=replace(response, output=tuple(output)))


def _file_parts(request: CanonicalRequest) -> Iterator[tuple[int, int, FilePart]]:
    for item_index, item in enumerate(request.input):
        if isinstance(item, Message):
            for part_index, part in enumerate(item.content):
                if isinstance(part, FilePart):
                    yield item_index, part_index, part


def _models_accept_files(models: tuple[str, ...]) -> list[bool]:
    """Per requested model: does the catalog say it takes file input (unknown models: no)."""
    found = [model_get(model_id=model) for model in models]
    return [model is not None and "file" in (model.input_modalities or ()) for model in found]


def _parse_all(
    request: CanonicalRequest, engine: str | None, limits: tuple[RoutingLimit, ...], ctx: RequestContext
) -> Staged | Block:
    tally = _Tally()
    deadline = time.monotonic() + PARSE_SECONDS
    fetch_deadline = time.monotonic() + sources.FETCH_SECONDS
    known = annotations.sent_back(request)
    parsed: dict[str, str] = {}
    items = [list(item.content) if isinstance(item, Message) else None for item in request.input]
    ocr = None
    try:
        if engine in OCR_ENGINES:
            ocr = OcrEngine(ocr_require(engine), limits, ctx)
        elif engine is None and ocr_model():
            ocr = OcrEngine(ocr_model(), limits, ctx)
        for number, (item_index, part_index, part) in enumerate(_file_parts(request), start=1):
            name = file_name(part, number)
            loaded = file_load(part, name=name, fetch_deadline=fetch_deadline)
            text = known.get(loaded.hash)
            if text is not None:
                tally.reused += 1
            elif (text := parsed.get(loaded.hash)) is None:  # the same file twice in one request: parsed once
                text = parsed[loaded.hash] = _parse(loaded, engine=engine, ocr=ocr, deadline=deadline, tally=tally)
            tally.files += 1
            annotation = annotations.file_annotation(hash=loaded.hash, name=name, text=text)
            content = items[item_index]
            assert content is not None
            content[part_index] = TextPart(text=f"File: {name}\n\n{text}", annotations=(annotation,))
    except OutOfTime as late:
        message = MSG_OUT_OF_TIME.format(name=late.args[0], seconds=PARSE_SECONDS)
        return Block(message, status=400, cost_usd=_ocr_cost(ocr), holds=_ocr_holds(ocr))
    except GatewayError as error:  # the OCR calls made for the files before it ran: charged with the refusal
        metadata = error.metadata or None
        return Block(
            error.message, status=error.status, metadata=metadata, cost_usd=_ocr_cost(ocr), holds=_ocr_holds(ocr)
        )
    except BaseException:
        for held in _ocr_holds(ocr):
            hold_drop(held)
        raise
    new_input = tuple(
        Message(role=item.role, content=tuple(content)) if isinstance(item, Message) and content is not None else item
        for item, content in zip(request.input, items, strict=True)
    )
    return _staged(replace(request, input=new_input), tally, ocr)


def _parse(loaded: LoadedFile, *, engine: str | None, ocr: OcrEngine | None, deadline: float, tally: _Tally) -> str:
    if loaded.kind != "pdf":
        tally.used(loaded.kind)
        return text_of(loaded, deadline=deadline)
    read = pdf_read(loaded, deadline=deadline, images=ocr is not None)
    tally.pages += len(read.pages)
    tally.pdf_seconds += read.seconds
    tally.used("pdf-text")
    return _pdf_text(loaded, read, engine=engine, ocr=ocr)


def _ocr_cost(ocr: OcrEngine | None) -> Decimal:
    return ocr.cost if ocr is not None else Decimal(0)


def _ocr_holds(ocr: OcrEngine | None) -> tuple[ReservationHandle, ...]:
    """The OCR calls' holds, handed on with the stage's result (the request's hold or a refusal's charge)."""
    return tuple(ocr.holds) if ocr is not None else ()


def _pdf_text(loaded: LoadedFile, read: PdfRead, *, engine: str | None, ocr: OcrEngine | None) -> str:
    """The pages' text layer; pages without one read by the OCR engine when there is one. A PDF with no text
    at all and no OCR engine is refused (the model would get an empty file), and so is one with more scanned
    pages than the OCR engine reads in a request, before any of them is sent."""
    if not any(page.text for page in read.pages) and ocr is None:
        raise FileRefused(loaded.name, MSG_NO_TEXT_LAYER if engine is None else MSG_TEXT_LAYER_ONLY)
    scanned = sum(1 for page in read.pages if not page.text and page.images)
    if ocr is not None and ocr.pages + scanned > ocr_max_pages():
        raise FileRefused(loaded.name, MSG_TOO_MANY_SCANS.format(limit=ocr_max_pages()))
    texts: list[tuple[int, str]] = []
    for page in read.pages:
        text = page.text
        if not text and ocr is not None and page.images:
            text = ocr.read(page, name=loaded.name)
        texts.append((page.number, text))
    if not any(text for _, text in texts):
        raise FileRefused(loaded.name, MSG_NOTHING_READ)
    return "\n\n".join(f"[Page {number}]\n{text}" for number, text in texts)


def _staged(request: CanonicalRequest, tally: _Tally, ocr: OcrEngine | None = None) -> Staged:
    if ocr is not None and ocr.pages:
        tally.used("ocr")
    engine = "+".join(tally.engines) or "annotations"
    figures = {"files": tally.files, "pages": tally.pages, "engine": engine}
    data = {**figures, "reused": tally.reused, "pdf_parse_ms": round(tally.pdf_seconds * 1000, 1)}
    cost = ocr.cost if ocr is not None and ocr.pages else None
    if cost is not None:
        data["ocr_pages"] = ocr.pages if ocr else 0
    summary = "native" if engine == "native" else f"parsed {tally.files - tally.reused} file(s)"
    if tally.reused:
        summary += f", {tally.reused} from annotations"
    entry = StageEntry(type="request_plugin", name=PLUGIN_ID, outcome=summary, data=data, cost_usd=cost)
    return Staged(
        request=request,
        entries=(entry,),
        cost_usd=cost or Decimal(0),
        record={"plugins": {PLUGIN_ID: figures}},
        holds=_ocr_holds(ocr),
    )
