"""How a changed text is put back into a request: one setter per place a text the model reads sits (a message's
text part, a file's name or data, an annotation, a tool's description or schema, a call's arguments, ...).

Each returns a new CanonicalRequest (they are frozen dataclasses); JSON values (schemas, annotations) are copied
before a string in them changes."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from routing.canonical import CanonicalRequest, Item, Message, TextPart

Setter = Callable[[CanonicalRequest, str], CanonicalRequest]


def unchanged(request: CanonicalRequest, new: str) -> CanonicalRequest:
    return request


def file_setter(index: int, part_index: int, field: str, encode: Callable[[str], str] | None = None) -> Setter:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        value = encode(new) if encode is not None else new
        parts[part_index] = replace(parts[part_index], **{field: value})  # type: ignore[arg-type]  # a FilePart
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put


def annotation_setter(index: int, part_index: int, path: JsonPath) -> Setter:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        part = parts[part_index]
        assert isinstance(part, TextPart)
        parts[part_index] = replace(part, annotations=tuple(_set_in(list(part.annotations), path, new)))
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put


@dataclass(frozen=True, slots=True)
class _Key:
    """A step of a path that names a dict's key itself (a property name), not the value under it."""

    name: str


# A place in a JSON value: object keys, array positions, and a final _Key for a property name itself.
JsonPath = tuple[str | int | _Key, ...]


def json_strings(value: object, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    """Every string of a JSON value and every key of its objects (a schema's property names reach the model as
    much as its descriptions). A key comes after what is under it, so that changing the texts in this order
    never renames a key on the path of a text still to change."""
    if isinstance(value, str) and value:
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from json_strings(inner, (*path, key))
            if isinstance(key, str) and key:
                yield (*path, _Key(key)), key
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from json_strings(inner, (*path, position))


def _set_in(tree: Any, path: JsonPath, new: str) -> Any:
    """A copy of the JSON value `tree` with the string at `path` (or the key, for a final _Key) replaced."""
    tree = copy.deepcopy(tree)
    node: Any = tree
    for step in path[:-1]:
        node = node[step]
    last = path[-1]
    if not isinstance(last, _Key):
        node[last] = new
        return tree
    name, number = new, 1
    while name in node and name != last.name:  # two keys redacted alike stay two properties
        number += 1
        name = f"{new} ({number})"
    renamed = {name if key == last.name else key: inner for key, inner in node.items()}
    node.clear()
    node.update(renamed)
    return tree


def tool_setter(index: int, path: JsonPath) -> Setter:
    """`path` () is the description, else where the string is in the parameters."""

    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        tools = list(request.tools)
        if not path:
            tools[index] = replace(tools[index], description=new)
        else:
            tools[index] = replace(tools[index], parameters=_set_in(tools[index].parameters, path, new))
        return replace(request, tools=tuple(tools))

    return put


def format_setter(path: JsonPath) -> Setter:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        return replace(request, text_format=_set_in(request.text_format, path, new))

    return put


def item_setter(index: int, name: str) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items = list(request.input)
        items[index] = replace(items[index], **{name: new})  # type: ignore[arg-type]  # a call or its output
        return replace(request, input=tuple(items))

    return put


def reasoning_setter(index: int, name: str, text_index: int) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        texts = list(getattr(items[index], name))
        texts[text_index] = new
        items[index] = replace(items[index], **{name: tuple(texts)})  # type: ignore[arg-type]  # a Reasoning
        return replace(request, input=tuple(items))

    return put


def part_setter(index: int, part_index: int) -> Callable[[CanonicalRequest, str], CanonicalRequest]:
    def put(request: CanonicalRequest, new: str) -> CanonicalRequest:
        items: list[Item] = list(request.input)
        message = items[index]
        assert isinstance(message, Message)
        parts = list(message.content)
        parts[part_index] = replace(parts[part_index], text=new)  # type: ignore[arg-type]  # a TextPart
        items[index] = replace(message, content=tuple(parts))
        return replace(request, input=tuple(items))

    return put
