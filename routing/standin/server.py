"""The local stand-in provider: a small threaded HTTP server on loopback that speaks the wire formats
of our adapters, with scripted behaviour (see script.py). Used by the tests, the benchmark and
`make run`, so the gateway answers real requests without any provider key."""

import json
import random
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from routing.standin import embeddings, formats, formats_anthropic, hosted, moderations, search
from routing.standin.script import Script, directive, parse_path

VERTEX_METHODS = (":rawPredict", ":streamRawPredict")  # Anthropic on Vertex: the Messages format
WIRE = {
    "/chat/completions": (formats.chat_body, formats.chat_stream, formats.openai_error, formats.chat_stream_error),
    "/responses": (
        formats.responses_body,
        formats.responses_stream,
        formats.openai_error,
        formats.responses_stream_error,
    ),
    "/messages": (
        formats_anthropic.messages_body,
        formats_anthropic.messages_stream,
        formats_anthropic.anthropic_error,
        formats_anthropic.messages_stream_error,
    ),
    "/converse": (
        formats_anthropic.converse_body,
        formats_anthropic.converse_stream,
        formats_anthropic.bedrock_error,
        formats_anthropic.converse_stream_error,
    ),
}
EVENT_STREAM = "application/vnd.amazon.eventstream"
FLOOD_DELTA_BYTES = 1024  # a flood's deltas (script.flood)
WORDS = ("amber", "brook", "cedar", "dune", "ember", "fjord", "grove", "harbor", "isle", "juniper", "kelp", "lagoon")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _prompt_text(body: dict[str, Any]) -> str:
    """All text the caller sent, to find a `<<standin {...}>>` directive and to count tokens."""
    return "\n".join(_strings([body.get("messages"), body.get("input"), body.get("system"), body.get("instructions")]))


def _first_tool(body: dict[str, Any]) -> str:
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            return name
    return "get_weather"


def _tool_names(body: dict[str, Any]) -> set[str]:
    tools = (body.get("tools") or []) + ((body.get("toolConfig") or {}).get("tools") or [])
    names = {t.get("name") or (t.get("function") or t.get("toolSpec") or {}).get("name") for t in tools}
    return {name for name in names if isinstance(name, str)}


def _stop_sequences(body: dict[str, Any]) -> list[str]:
    """The request's stop sequences in each wire format: Chat `stop`, Anthropic `stop_sequences`, Converse
    `inferenceConfig.stopSequences` (the Responses API has none)."""
    found = body.get("stop") or body.get("stop_sequences") or (body.get("inferenceConfig") or {}).get("stopSequences")
    found = [found] if isinstance(found, str) else found
    return [item for item in found or () if isinstance(item, str) and item]


def _cut(text: str, stops: list[str]) -> tuple[str, str | None]:
    """The text up to the first stop sequence in it (excluded, as providers do), and that sequence."""
    hits = sorted((text.find(stop), n, stop) for n, stop in enumerate(stops) if stop in text)
    return (text[: hits[0][0]], hits[0][2]) if hits else (text, None)


def _logprobs(body: dict[str, Any]) -> tuple[bool, int]:
    """Whether the request asked for token logprobs (Chat `logprobs`; Responses `include`), and how many
    alternatives."""
    wanted = body.get("logprobs") is True or "message.output_text.logprobs" in (body.get("include") or ())
    top = body.get("top_logprobs")
    return wanted, top if isinstance(top, int) and not isinstance(top, bool) and wanted else 0


def _flood(script: Script) -> dict[str, str]:
    """A hostile answer's field (script.flood): `flood` bytes of words, whatever the request's max tokens."""
    if script.flood <= 0:
        return {}
    words = " ".join(WORDS) + " "
    text = (words * (script.flood // len(words) + 1))[: script.flood]
    if script.flood_field == "tool_arguments":  # still one JSON object, as a model's arguments are
        text = json.dumps({"note": text[: max(0, script.flood - 12)]})
    return {script.flood_field: text}


def _tool_results(value: object) -> int:
    """How many tool results the request carries (a tool message, function_call_output, tool_result, toolResult)."""
    if isinstance(value, list):
        return sum(_tool_results(item) for item in value)
    if not isinstance(value, dict):
        return 0
    found = value.get("role") == "tool" or value.get("type") in ("function_call_output", "tool_result")
    return int(found or "toolResult" in value) + sum(_tool_results(item) for item in value.values())


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], script: Script | None = None) -> None:
        super().__init__(address, StandinHandler)
        self.script = script or Script()
        self.received: deque[dict[str, Any]] = deque(maxlen=500)
        self.aborted_streams = 0  # streams whose client hung up before the end
        self.lock = threading.Lock()

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client hung up (timeouts, disconnect tests): expected, not an error
        super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server
        return f"http://{host}:{port}"

    def requests_for(self, suffix: str = "") -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.received if r["path"].endswith(suffix)]

    def clear(self) -> None:
        with self.lock:
            self.received.clear()


class StandinHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE writes go out at once (no 40 ms delayed-ACK stalls)
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the gateway's access log is the one that matters
        return

    def do_GET(self) -> None:
        if self.path.startswith("/_standin/requests"):
            with self.server.lock:
                payload = json.dumps(list(self.server.received)).encode()
            self._send_bytes(200, payload, "application/json")
            return
        if self.path in ("/", "/healthz"):
            self._send_bytes(200, b'{"status":"ok","service":"gateway local stand-in provider"}', "application/json")
            return
        if search.handles(self.path):  # routing/standin/search.py: a SearXNG-shaped engine and pages to fetch
            search.answer(self)
            return
        self._send_bytes(404, b'{"error":{"message":"not found"}}', "application/json")

    def do_POST(self) -> None:
        overrides, path = parse_path(self.path)
        if path.endswith("/token"):
            self._token()
            return
        wire_path = "/messages" if path.endswith(VERTEX_METHODS) else path
        converse_stream = wire_path.endswith("/converse-stream")
        wire_path = "/converse" if converse_stream else wire_path
        wire = next((WIRE[suffix] for suffix in WIRE if wire_path.endswith(suffix)), None)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        credential = (
            (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            or self.headers.get("x-api-key")
            or self.headers.get("api-key")
            or ""
        )
        with self.server.lock:
            self.server.received.append(
                {
                    "path": path,
                    "credential": credential,
                    "body": body,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
            )
        if path.endswith("/moderations"):  # routing/standin/moderations.py
            moderations.answer(self, body, self.server.script.merged(overrides), credential)
            return
        if path.endswith("/embeddings"):  # routing/standin/embeddings.py
            embeddings.answer(self, body, self.server.script.merged(overrides), credential)
            return
        if wire is None:
            self._send_bytes(404, b'{"error":{"message":"unknown path"}}', "application/json")
            return
        body_fn, stream_fn, error_fn, stream_error_fn = wire
        answer_body, answer_stream = hosted.wire(wire_path, body, body_fn, stream_fn)  # provider-run tools: hosted.py
        script = self.server.script.merged(overrides).merged(directive(_prompt_text(body)))
        if script.latency_ms:
            time.sleep(script.latency_ms / 1000)
        status = script.status
        if status == 200 and (not credential or (script.key and credential != script.key)):
            status = 401
        if status != 200:
            self._send_error(status, error_fn(status), script)
            return
        streaming = bool(body.get("stream")) or converse_stream
        if script.malformed:
            if streaming:
                self._stream([b"data: {not json at all\n\n"], b"data: [DONE]\n\n", script, stream_error_fn)
            else:
                self._send_bytes(200, b'{"choices": "garbage", "content": 7, "output": "x"}', "application/json")
            return
        plan = self._plan(body, script)
        if streaming:
            chunks, terminal = answer_stream(plan)
            self._stream(
                chunks,
                terminal,
                script,
                stream_error_fn,
                content_type=EVENT_STREAM if converse_stream else "text/event-stream",
            )
        else:
            self._send_bytes(200, json.dumps(answer_body(plan)).encode(), "application/json", self._rate_headers())

    def _token(self) -> None:
        """An OAuth token endpoint (JWT bearer grant) for service-account credentials."""
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        with self.server.lock:
            self.server.received.append({"path": "/token", "credential": "", "body": form, "headers": {}})
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"] or not form.get("assertion"):
            self._send_bytes(400, b'{"error":"invalid_grant"}', "application/json")
            return
        self._send_bytes(
            200, b'{"access_token":"ya29.standin-token","expires_in":3599,"token_type":"Bearer"}', "application/json"
        )

    def _plan(self, body: dict[str, Any], script: Script) -> formats.Plan:
        tool = ""
        if "," in script.tool_call:  # a sequence: the n-th name once the request carries n tool results
            names = script.tool_call.split(",")
            done = _tool_results(body)
            tool = names[done] if done < len(names) and names[done] in _tool_names(body) else ""
        elif script.tool_call:
            tool = _first_tool(body) if script.tool_call == "auto" else script.tool_call
        text = "" if tool and script.text == Script.text else script.text
        if script.sample and not tool:
            seed = body.get("seed")
            rng = random.Random(seed if isinstance(seed, int) else None)
            text = " ".join(rng.choice(WORDS) for _ in range(8)) + "."
        text, stop_sequence = _cut(text, _stop_sequences(body))
        flooded = _flood(script)
        text = flooded.get("text", text)
        logprobs, top_logprobs = _logprobs(body)
        input_tokens = script.input_tokens
        if input_tokens is None:
            input_tokens = max(1, len(_prompt_text(body)) // 4)
        reasoning = flooded.get("reasoning", script.reasoning)
        if "signature" in flooded:  # a signature belongs to a reasoning block
            reasoning = reasoning or "Thinking it over."
        tool_arguments = flooded.get("tool_arguments", script.tool_arguments)
        reasoning_tokens = script.reasoning_tokens
        if reasoning_tokens is None:
            reasoning_tokens = len(reasoning) // 4
        output_tokens = (
            script.output_tokens
            if script.output_tokens is not None
            else (max(1, (len(text) + len(tool_arguments if tool else "")) // 4) + reasoning_tokens)
        )
        return formats.Plan(
            model=body.get("model", "standin"),
            text=text,
            reasoning=reasoning,
            tool_name=tool,
            tool_arguments=tool_arguments,
            parallel=max(1, min(script.parallel, 8)),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=min(script.cached_tokens, input_tokens),
            reasoning_tokens=reasoning_tokens,
            finish=script.finish,
            chunks=max(1, script.chunks, script.flood // FLOOD_DELTA_BYTES),
            stop_sequence=stop_sequence,
            stop_field="/stop_sequence" in (body.get("additionalModelResponseFieldPaths") or ()),
            logprobs=logprobs,
            top_logprobs=top_logprobs,
            signature=flooded.get("signature", ""),
            hosted_flood=flooded.get("hosted", ""),
        )

    def _rate_headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "9999",
            "x-ratelimit-reset-requests": "6ms",
        }

    def _send_error(self, status: int, payload: dict[str, Any], script: Script) -> None:
        headers = self._rate_headers()
        if status == 429:
            headers["x-ratelimit-remaining-requests"] = "0"
        if script.retry_after is not None:
            headers["retry-after"] = str(script.retry_after)
        self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_bytes(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(
        self,
        chunks: list[bytes],
        terminal: bytes,
        script: Script,
        stream_error_fn: Callable[[int], bytes],
        content_type: str = "text/event-stream",
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in self._rate_headers().items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for index, chunk in enumerate(chunks):
                if script.cut_after is not None and index >= script.cut_after:
                    if script.mid_stream_error:
                        self._chunk(stream_error_fn(script.mid_stream_error))
                        self._end_chunks()
                    else:
                        self.close_connection = True  # no terminal event, no last chunk: a cut stream
                        self.wfile.flush()
                    return
                self._chunk(chunk)
                if index == 0 and script.stall_ms:
                    time.sleep(script.stall_ms / 1000)
                elif script.interval_ms:
                    time.sleep(script.interval_ms / 1000)
            self._chunk(terminal)
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the gateway hung up
            with self.server.lock:
                self.server.aborted_streams += 1

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def serve_in_thread(host: str = "127.0.0.1", port: int = 0, script: Script | None = None) -> StandinServer:
    server = StandinServer((host, port), script)
    threading.Thread(target=server.serve_forever, name="standin", daemon=True).start()
    return server
