"""The texts of a request that the model reads, each with how to put a changed one back (guardrails.setters), and
the scan of one such text.

The first pass reads every text (`request_texts`): instructions, each message's text parts (adjacent ones also
joined), the text of the file annotations an answer sent back carries, file names, function call names and
arguments, tool outputs, replayed reasoning, tool names, descriptions and schemas, a structured output's schema,
the text of text files (guardrails.filetext). The second pass reads what the pre-stages before it added
(`added_texts`), and a file that still goes as it is and whose text cannot be read raises `Unreadable`."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace

from guardrails.detectors.entity import EntitySpan
from guardrails.filetext import file_text
from guardrails.matches import REDACTION_TEMPLATE, Scan
from guardrails.policy import ContentPolicy
from guardrails.setters import (
    Setter,
    annotation_setter,
    file_setter,
    format_setter,
    item_setter,
    json_strings,
    part_setter,
    reasoning_setter,
    tool_setter,
)
from routing.canonical import CanonicalRequest, FilePart, FunctionCall, FunctionCallOutput, Message, Reasoning, TextPart


@dataclass(frozen=True, slots=True)
class RequestText:
    """One text of the request and how to put a changed one back. `put` None: a name (a tool's, a function
    call's), which cannot be redacted: the model would call a tool that is not the caller's. `run`: adjacent text
    parts of one message, joined (`text`) as the model reads them: where each part ends in it, and its setter."""

    text: str
    put: Setter | None
    run: tuple[tuple[int, Setter], ...] = ()

    def redact(self, request: CanonicalRequest, scan: Scan) -> CanonicalRequest:
        if self.put is None:  # a name with a redact match refuses the request (guardrails.stage)
            return request
        if not self.run:
            redacted = scan.redacted()
            return request if redacted == self.text else self.put(request, redacted)
        start = 0
        for (end, put), redacted in zip(self.run, _redacted_parts(scan, [end for end, _ in self.run]), strict=True):
            if redacted != self.text[start:end]:
                request = put(request, redacted)
            start = end
        return request


def text_scan(policy: ContentPolicy, text: RequestText, entities: tuple[EntitySpan, ...] = ()) -> Scan:
    """The policy's matches in one text. A run of text parts is scanned joined (a word split across two parts is
    one word to the model) and part by part (a pattern anchored at a part's start or end), the matches together."""
    scan = policy.scan(text.text, entities)
    if not text.run:
        return scan
    matches = list(scan.matches)
    start = 0
    for end, _ in text.run:
        found = policy.scan(text.text[start:end]).matches
        matches.extend(match._replace(start=match.start + start, end=match.end + start) for match in found)
        start = end
    return Scan(text.text, tuple(dict.fromkeys(matches)))


def _redacted_parts(scan: Scan, ends: list[int]) -> list[str]:
    """Each part of a run (`ends`: where each ends in the joined text) with its redactions: a region is replaced
    in the part where it starts, and the rest of it is taken out of the parts it reaches into."""
    regions = [region for region in scan.regions if region.action == "redact"]
    parts: list[str] = []
    start = 0
    for end in ends:
        pieces: list[str] = []
        cursor = start
        for region in regions:
            if region.end <= start or region.start >= end:
                continue
            pieces.append(scan.text[cursor : max(region.start, start)])
            if region.start >= start:
                pieces.append(REDACTION_TEMPLATE.format(label=region.redaction_label))
            cursor = min(region.end, end)
        pieces.append(scan.text[cursor:end])
        parts.append("".join(pieces))
        start = end
    return parts


def request_texts(request: CanonicalRequest) -> Iterator[RequestText]:
    if request.instructions:
        yield RequestText(request.instructions, lambda r, new: replace(r, instructions=new))
    for index, item in enumerate(request.input):
        match item:
            case Message():
                yield from _message_texts(index, item)
            case FunctionCallOutput():
                yield RequestText(item.output, item_setter(index, "output"))
            case FunctionCall():
                yield RequestText(item.name, None)  # the model reads the name of the call it made
                yield RequestText(item.arguments, item_setter(index, "arguments"))
            case Reasoning():  # a replayed reasoning item's text is sent on (OpenAI summaries, Anthropic thinking)
                for name in ("summary", "content"):
                    for text_index, text in enumerate(getattr(item, name)):
                        if text:
                            yield RequestText(text, reasoning_setter(index, name, text_index))
    yield from _tool_texts(request)
    for path, text in json_strings(request.text_format, ()):  # a structured output's schema is read like a tool's
        yield RequestText(text, format_setter(path))


def _message_texts(index: int, message: Message) -> Iterator[RequestText]:
    """A message's text parts (adjacent ones as one run: the model reads them one after the other), the text of
    the file annotations they carry, and each file's name (the provider passes it on, the file-parser writes it
    above the file's text)."""
    run: list[tuple[str, Setter]] = []
    for part_index, part in enumerate([*message.content, None]):
        if isinstance(part, TextPart):
            if part.text:
                run.append((part.text, part_setter(index, part_index)))
            continue
        if len(run) == 1:
            yield RequestText(run[0][0], run[0][1])
        elif run:
            ends = itertools.accumulate(len(text) for text, _ in run)
            puts = (put for _, put in run)
            yield RequestText("".join(text for text, _ in run), run[0][1], tuple(zip(ends, puts, strict=True)))
        run = []
        if isinstance(part, FilePart):
            if part.filename:
                yield RequestText(part.filename, file_setter(index, part_index, "filename"))
            # A text file's text is the caller's: read before any stage does (a router's panel runs before the
            # file-parser), redacted in the file itself. Files it cannot read are the second pass's.
            if (read := file_text(part)) is not None and read[0]:
                yield RequestText(read[0], file_setter(index, part_index, "file_data", read[1]))
    for part_index, part in enumerate(message.content):
        if isinstance(part, TextPart):
            yield from _annotation_texts(index, part_index, part)


class Unreadable(Exception):
    """A file that goes to the provider as it is and whose text the gateway cannot read (guardrails.filetext)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def unreadable_file(request: CanonicalRequest) -> str | None:
    """The name of the first file that goes to the provider as it is and whose text the gateway cannot read."""
    try:
        for _ in added_texts(request):
            pass
    except Unreadable as file:
        return file.name
    return None


def scanned_texts(texts: list[RequestText]) -> Iterator[str]:
    """What the filters read, for the scanned-bytes budget: each text, and a run of text parts once more, part by
    part (text_scan reads it joined and part by part). The budget counts each text's folded views (guardrails.scan:
    a text with look-alike letters is read in two views, and a folded view may be longer than the text)."""
    for text in texts:
        yield text.text
        start = 0
        for end, _ in text.run:
            yield text.text[start:end]
            start = end


def added_texts(request: CanonicalRequest) -> Iterator[RequestText]:
    """The texts the pre-stages before the second pass added: a text part of a caller's message that carries an
    annotation (a parsed file's, the web results': the caller's own input_text carries none, only an answer's
    output_text sent back does, and the first pass read that). A file that still goes as it is and is not a text
    file the first pass read raises Unreadable."""
    for index, item in enumerate(request.input):
        if not isinstance(item, Message):
            continue
        for part_index, part in enumerate(item.content):
            if isinstance(part, TextPart) and part.annotations and part.text and item.role != "assistant":
                yield RequestText(part.text, part_setter(index, part_index))
            elif isinstance(part, FilePart) and file_text(part) is None:  # a text file: the first pass read it
                raise Unreadable(part.filename or part.file_url or "input_file")


def _annotation_texts(index: int, part_index: int, part: TextPart) -> Iterator[RequestText]:
    """The text of each file annotation an answer sent back carries: the file-parser hands it to the model in place
    of parsing the file again, so it is text the caller sends (scanned and redacted like the rest)."""
    for number, annotation in enumerate(part.annotations):
        file = annotation.get("file") if isinstance(annotation, dict) and annotation.get("type") == "file" else None
        content = file.get("content") if isinstance(file, dict) else None
        if not isinstance(content, list):
            continue
        for position, block in enumerate(content):
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"]:
                path = (number, "file", "content", position, "text")
                yield RequestText(block["text"], annotation_setter(index, part_index, path))


def _tool_texts(request: CanonicalRequest) -> Iterator[RequestText]:
    """Tool definitions are text the model reads: each name and description, and the strings and property names
    of each parameter schema; and each string of a hosted tool's definition (an MCP server's label and
    description, allowed tool names, ...), which cannot be redacted: the provider acts on the definition, and a
    changed one is another tool (a redact match refuses, like one in a name)."""
    for index, tool in enumerate(request.tools):
        yield RequestText(tool.name, None)
        if tool.description:
            yield RequestText(tool.description, tool_setter(index, ()))
        for path, text in json_strings(tool.parameters, ()):
            yield RequestText(text, tool_setter(index, path))
    for hosted in request.hosted_tools:
        for key, value in hosted.spec.items():
            if key not in HOSTED_UNREAD:
                yield from (RequestText(text, None) for _, text in json_strings(value, ()))


# What of a hosted tool's definition is not scanned: its type (the vocabulary), and the credentials the provider
# sends to an MCP server (the model never reads them; a guardrail pattern matching a token would refuse the tool).
HOSTED_UNREAD = frozenset({"type", "headers", "authorization"})
