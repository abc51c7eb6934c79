"""File annotations: `{type: "file", file: {hash, name, content: [{type: "text", text}]}}`, carried by the
answer's first output_text part so that a caller who sends the answer back skips parsing the same file again
(found by its hash: the sha256 of its bytes)."""

from typing import Any

from routing.canonical import CanonicalRequest, Message, TextPart


def file_annotation(*, hash: str, name: str, text: str) -> dict[str, Any]:
    return {"type": "file", "file": {"hash": hash, "name": name, "content": [{"type": "text", "text": text}]}}


def sent_back(request: CanonicalRequest) -> dict[str, str]:
    """The text of each file (by hash) that an assistant message the caller sent back carries an annotation of."""
    known: dict[str, str] = {}
    for item in request.input:
        if isinstance(item, Message) and item.role == "assistant":
            for part in item.content:
                if isinstance(part, TextPart):
                    for annotation in part.annotations:
                        if (found := _parsed(annotation)) is not None:
                            known.setdefault(*found)
    return known


def _parsed(annotation: dict[str, Any]) -> tuple[str, str] | None:
    """(hash, text) of a well-formed file annotation with text content; None for anything else."""
    file = annotation.get("file") if annotation.get("type") == "file" else None
    if not isinstance(file, dict) or not isinstance(file.get("hash"), str) or not isinstance(file.get("content"), list):
        return None
    texts = [
        c["text"]
        for c in file["content"]
        if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
    ]
    return (file["hash"], "\n\n".join(texts)) if texts else None


def for_answer(request: CanonicalRequest) -> tuple[dict[str, Any], ...]:
    """The annotations the answer carries: those of the files this request's input turned into text (a file
    parsed now or reused from an annotation), once per file."""
    found: dict[str, dict[str, Any]] = {}
    for item in request.input:
        if isinstance(item, Message) and item.role != "assistant":
            for part in item.content:
                if isinstance(part, TextPart):
                    for annotation in part.annotations:
                        if annotation.get("type") == "file":
                            found.setdefault(annotation["file"]["hash"], annotation)
    return tuple(found.values())
