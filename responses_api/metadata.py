"""`gateway_metadata`: a truthful account of the routing decision (opt-in with X-Gateway-Metadata), on
results and on every error of POST /responses after authentication."""

import logging

from gateway.billing.generations import ProviderAttempt
from gateway.errors import GatewayError
from routing.selection import Candidate, RoutePlan

logger = logging.getLogger(__name__)
# The spec's opt-in header and its legacy alias (a request header only: the request body has no such field),
# then the names the openrouter SDK sends for the same option (its `x_open_router_metadata` argument).
METADATA_HEADERS = (
    "HTTP_X_GATEWAY_METADATA",
    "HTTP_X_GATEWAY_EXPERIMENTAL_METADATA",
    "HTTP_X_OPENROUTER_METADATA",
    "HTTP_X_OPENROUTER_EXPERIMENTAL_METADATA",
)
MSG_METADATA_CONFLICT = (
    "The metadata opt-in headers disagree: {names} were sent with different values; send one of them "
    "(X-OpenRouter-Metadata is an alias of X-Gateway-Metadata)"
)


def _header_name(meta_key: str) -> str:
    return "-".join(part.capitalize() for part in meta_key.removeprefix("HTTP_").split("_")).replace(
        "Openrouter", "OpenRouter"
    )


def metadata_requested(meta: dict) -> bool:
    return any(str(meta.get(name, "")).strip().lower() == "enabled" for name in METADATA_HEADERS)


def metadata_headers_check(meta: dict) -> None:
    """Aliases that say different things are a 400, not a guess at which one the caller meant."""
    sent = {name: str(meta[name]).strip().lower() for name in METADATA_HEADERS if name in meta}
    if len(set(sent.values())) > 1:
        names = ", ".join(_header_name(name) for name in sent)
        raise GatewayError(
            MSG_METADATA_CONFLICT.format(names=names), metadata={"headers": list(map(_header_name, sent))}
        )


def gateway_metadata(*, plan: RoutePlan, attempts: list[ProviderAttempt], served: Candidate | None) -> dict:
    attempt_number = len(attempts)  # 1-based number of the attempt that served (or the last one)
    available = [
        {
            "model": endpoint.model_id,
            "provider": endpoint.provider_slug,
            "selected": bool(served and endpoint.id == served.endpoint.id),
        }
        for endpoint in plan.available
    ]
    strategy = plan.strategy if attempt_number <= 1 else "fallback"
    if served:
        failed = ", ".join(f"{a.provider_name} {a.status or a.error_type}" for a in attempts[:-1])
        summary = (
            f"Served by {served.endpoint.provider_slug} ({served.endpoint.model_id}) on attempt "
            f"{attempt_number} of {len(plan.candidates)}" + (f" after: {failed}" if failed else "")
        )
    else:
        summary = f"All {len(attempts)} attempts failed" if attempts else "No attempt was made"
    if plan.basis:
        summary += f"; endpoints {plan.basis}"
    return {
        "requested": plan.requested,
        "strategy": strategy,
        "region": served.endpoint.region if served else "",
        "summary": summary,
        "attempt": attempt_number,
        "is_byok": bool(served and served.is_byok),
        "endpoints": {"total": len(plan.available), "available": available},
        "attempts": [{"provider": a.provider_name, "model": a.model_permaslug, "status": a.status} for a in attempts],
        "pipeline": [],
    }


def unplanned_metadata(*, requested: str, models: list[str] | tuple = (), reason: str = "") -> dict:
    """For an error before any route was planned (invalid request, unknown model, no usable endpoint):
    the requested model's endpoints as the catalog lists them, none selected, no attempt."""
    available = []
    try:
        from routing.selectors import endpoints_for_model

        for model in dict.fromkeys(models or ([requested] if requested else [])):
            available += [
                {"model": endpoint.model_id, "provider": endpoint.provider_slug, "selected": False}
                for endpoint in endpoints_for_model(model_id=model)
            ]
    except Exception:  # the error being answered matters more than this detail
        logger.exception("could not list the endpoints for gateway_metadata")
    return {
        "requested": requested,
        "strategy": "direct",
        "region": "",
        "summary": "No attempt was made" + (f": {reason}" if reason else ""),
        "attempt": 0,
        "is_byok": False,
        "endpoints": {"total": len(available), "available": available},
        "attempts": [],
        "pipeline": [],
    }


def error_reason(exc: BaseException) -> str:
    """A short machine-readable reason for the summary: the availability code, or the error's class."""
    metadata = getattr(exc, "metadata", None)
    availability = metadata.get("availability") if isinstance(metadata, dict) else None
    if isinstance(availability, dict) and availability.get("code"):
        return str(availability["code"])
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    return f"HTTP {status}" if status else ""


def attach_error_metadata(exc: BaseException, *, requested: str, models=()) -> None:
    """Give an error without gateway_metadata the unplanned account (the caller checked the opt-in)."""
    if getattr(exc, "gateway_metadata", None) is None:
        try:
            metadata = unplanned_metadata(requested=requested, models=models, reason=error_reason(exc))
            exc.gateway_metadata = metadata  # type: ignore[attr-defined]
        except AttributeError:  # an exception type that refuses attributes: answered without it
            pass


def requested_models(data) -> tuple[str, list[str]]:
    """(the model as requested, the catalog ids it and `models` name), from request data of any shape."""
    if not isinstance(data, dict):
        return "", []
    from routing.preferences import split_model_suffix

    listed = data.get("models")
    given: list[object] = [data.get("model"), *(listed if isinstance(listed, list) else [])]
    names = [name[:256] for name in given if isinstance(name, str) and name]
    return (names[0] if names else ""), [split_model_suffix(name)[0] for name in names]


def view_error_metadata(request, exc: BaseException) -> None:
    """For ResponseCreateApi.handle_exception: every error after authentication carries gateway_metadata
    when the caller opted in (401s and anything before authentication do not)."""
    if getattr(request, "_user", None) is None or not metadata_requested(request.META):
        return
    # The body only if it was parsed already (parsing here could raise anew).
    requested, models = requested_models(getattr(request, "_full_data", None))
    attach_error_metadata(exc, requested=requested, models=models)
