"""SSE framing of a streamed /responses answer that failed after its 200 went out (the events themselves:
responses_api.stream_render; the stream's run: responses_api.pipeline.respond_stream)."""

from responses_api.render import ResultShell, failure_error
from responses_api.stream_render import StreamRenderer


def failure_frames(
    renderer: StreamRenderer,
    shell: ResultShell,
    *,
    error_type: str,
    message: str,
    model: str,
    metadata: dict | None,
    provider: str | None = None,
    provider_code: str | None = None,
) -> bytes:
    """`error` then `response.failed`; the provider that failed and its own error code (not for a server error)
    ride along for the front doors that show them (the Chat Completions error chunk)."""
    body = failure_error(error_type, message)
    failed = shell.render(
        status="failed", model=model, output=renderer.items, error=body, error_type=error_type, metadata=metadata
    )
    if provider:
        failed["provider"] = provider
    if provider_code:
        failed["provider_code"] = provider_code
    return renderer.error(code=body["code"], message=body["message"]) + renderer.lifecycle("response.failed", failed)
