"""`gateway_metadata`: a truthful account of the routing decision (opt-in with X-Gateway-Metadata)."""

from gateway.billing.generations import ProviderAttempt
from routing.selection import Candidate, RoutePlan


def gateway_metadata(*, plan: RoutePlan, attempts: list[ProviderAttempt], served: Candidate | None) -> dict:
    attempt_number = len(attempts)  # 1-based number of the attempt that served (or the last one)
    available = [
        {"model": endpoint.model_id, "provider": endpoint.provider_slug,
         "selected": bool(served and endpoint.id == served.endpoint.id)}
        for endpoint in plan.available
    ]
    strategy = plan.strategy if attempt_number <= 1 else "fallback"
    if served:
        failed = ", ".join(f"{a.provider_name} {a.status or a.error_type}" for a in attempts[:-1])
        summary = (f"Served by {served.endpoint.provider_slug} ({served.endpoint.model_id}) on attempt "
                   f"{attempt_number} of {len(plan.candidates)}" + (f" after: {failed}" if failed else ""))
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
        "attempts": [{"provider": a.provider_name, "model": a.model_permaslug, "status": a.status}
                     for a in attempts],
        "pipeline": [],
    }
