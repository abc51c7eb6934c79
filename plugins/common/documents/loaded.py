"""A file's bytes as loaded (an `input_file` by the file-parser, a PDF page by web fetch): what the readers take."""

from dataclasses import dataclass


@dataclass(frozen=True)
class LoadedFile:
    name: str
    data: bytes
    kind: str  # pdf, text, markdown, csv, json or html (plugins.file_parser.sources.KINDS)
    hash: str  # sha256 of the bytes: the annotation's `hash`
