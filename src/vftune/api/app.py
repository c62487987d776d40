"""The REST API for orchestrators and the CLI: current state from the agent, history from the store."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune import __version__
from vftune.agent.loop import Agent, VfState
from vftune.api import models
from vftune.api.metrics import AgentCollector
from vftune.model import VfInfo
from vftune.store.db import Store

PCI_ADDRESS = r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
HISTORY_DEFAULT_S = 3600.0


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    limit: int


class BadParameter(Exception):
    def __init__(self, message: str) -> None:
        self.message = message


def parse_time(name: str, value: str | None, default: float) -> float:
    """Unix seconds or an ISO 8601 time with a zone; anything else is a 422 naming the value."""
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadParameter(f"{name}={value!r}: not Unix seconds or an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise BadParameter(f"{name}={value!r}: ISO 8601 time needs a zone (Z or +hh:mm)")
    return parsed.timestamp()


def _vf_out(vf: VfInfo, st: VfState | None, wall: Callable[[float], float]) -> dict[str, Any]:
    s = st.sample if st else None
    return {
        "pci": vf.pci,
        "pf": vf.pf,
        "index": vf.index,
        "driver": vf.driver,
        "guest": vf.guest.name if vf.guest else None,
        "guest_uuid": vf.guest.uuid if vf.guest else None,
        "itr": st.itr if st else 0,
        "policy": st.policy if st else "",
        "phase": str(st.policy_state.get("phase")) if st and st.policy_state.get("phase") else None,
        "rx_pps": s.rx_pps if s else None,
        "rx_bps": s.rx_bps if s else None,
        "tx_pps": s.tx_pps if s else None,
        "tx_bps": s.tx_bps if s else None,
        "interrupts_per_s": s.interrupts_per_s if s else None,
        "guest_cpu": s.guest_cpu if s else None,
        "fresh": s.fresh if s else None,
        "updated": wall(s.t) if s else None,
        "last_decision": st.last_decision if st else None,
    }


def create_app(agent: Agent, store: Store | None, detail: str = "") -> FastAPI:
    app = FastAPI(
        title="vftune",
        version=__version__,
        description="Interrupt moderation tuning for SR-IOV VFs passed through to KVM guests.",
    )
    registry = CollectorRegistry()
    registry.register(AgentCollector(agent))

    @app.exception_handler(BadParameter)
    async def bad_parameter(_: Request, exc: BadParameter) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
        message = f"{where}={first.get('input')!r}: {first.get('msg', 'invalid')}"
        return JSONResponse({"error": message, "detail": exc.errors()}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    def wall_now() -> float:
        return agent.wall(agent.host.now())

    def time_window(
        since: str | None = Query(None, description="Unix seconds or ISO 8601; default one hour before until"),
        until: str | None = Query(None, description="Unix seconds or ISO 8601; default now"),
        limit: int = Query(1000, ge=1, le=100_000, description="newest rows of the window to return"),
    ) -> Window:
        t_until = parse_time("until", until, wall_now())
        t_since = parse_time("since", since, t_until - HISTORY_DEFAULT_S)
        if t_since > t_until:
            raise BadParameter(f"since={since!r} is after until={until!r}")
        return Window(t_since, t_until, limit)

    def vf_or_404(pci: str) -> VfInfo:
        vf = agent.inventory.vf(pci.lower())
        if vf is None:
            raise StarletteHTTPException(404, f"no VF {pci} on this host")
        return vf

    @app.get("/healthz", response_model=models.Health)
    def healthz() -> Any:
        age = None if agent.last_tick_wall is None else time.time() - agent.last_tick_wall
        # Stalled: no tick for three intervals of wall time (the sim may run faster, never slower).
        stalled = age is not None and age > 3 * agent.config.interval + 5
        body = {
            "status": "starting" if age is None else ("stalled" if stalled else "ok"),
            "ticks": agent.ticks,
            "last_tick_age_s": age,
            "backend": agent.host.name,
        }
        return JSONResponse(body, status_code=503 if stalled else 200)

    @app.get("/v1/host", response_model=models.HostOut)
    def host() -> Any:
        caps = agent.caps
        with agent.lock:
            inv = agent.inventory
            pfs = []
            for pf in inv.pfs:
                st = agent.pfs.get(pf.name)
                s = st.sample if st else None
                pfs.append({
                    "name": pf.name, "pci": pf.pci, "device_id": f"0x{pf.device_id:04x}",
                    "driver": pf.driver, "num_vfs": pf.num_vfs, "total_vfs": pf.total_vfs,
                    "mode": st.mode if st else "napi",
                    "napi_budget": st.napi_budget if st else None,
                    "controller": st.controller if st else "",
                    "controller_state": dict(st.controller_state) if st else {},
                    "rx_pps": s.rx_pps if s else None, "rx_bps": s.rx_bps if s else None,
                    "last_decision": st.last_decision if st else None,
                })
        return {
            "backend": agent.host.name,
            "detail": detail,
            "started": agent.started_wall,
            "interval_s": agent.config.interval,
            "ticks": agent.ticks,
            "vf_count": len(inv.vfs()),
            "capabilities": {
                "backend": caps.backend, "itr_min": caps.itr_min, "itr_max": caps.itr_max,
                "vf_itr": caps.vf_itr, "rx_modes": list(caps.rx_modes),
                "pf_coalesce": caps.pf_coalesce, "napi_budget": caps.napi_budget,
                "counter_refresh_s": caps.counter_refresh_s, "missing": list(caps.missing),
            },
            "pfs": pfs,
            "ignored": [{"name": i.name, "reason": i.reason} for i in inv.ignored],
            "cost_model": agent.costs.report(),
        }

    @app.get("/v1/vfs", response_model=list[models.VfOut])
    def vfs() -> Any:
        with agent.lock:
            return [_vf_out(vf, agent.vfs.get(vf.pci), agent.wall) for vf in agent.inventory.vfs()]

    @app.get("/v1/vfs/{vf}", response_model=models.VfDetail, responses={404: {"model": models.ErrorBody}})
    def vf_detail(vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0")) -> Any:
        info = vf_or_404(vf)
        with agent.lock:
            st = agent.vfs.get(info.pci)
            out = _vf_out(info, st, agent.wall)
            out["policy_state"] = dict(st.policy_state) if st else {}
        return out

    @app.get(
        "/v1/vfs/{vf}/history", response_model=models.History,
        responses={404: {"model": models.ErrorBody}, 422: {"model": models.ErrorBody}},
    )
    def vf_history(
        vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0"),
        w: Window = Depends(time_window),
    ) -> Any:
        info = vf_or_404(vf)
        samples = store.samples(info.pci, w.since, w.until, w.limit) if store else []
        decisions = store.decisions(info.pci, w.since, w.until, w.limit) if store else []
        return {"pci": info.pci, "since": w.since, "until": w.until,
                "samples": samples, "decisions": decisions}

    @app.get("/v1/decisions", response_model=list[models.DecisionOut])
    def decisions(w: Window = Depends(time_window)) -> Any:
        return store.decisions(None, w.since, w.until, w.limit) if store else []

    @app.post("/v1/events", status_code=202, response_model=models.GuestEventOut,
              responses={422: {"model": models.ErrorBody}})
    def guest_event(event: models.GuestEventIn) -> Any:
        """A guest started or stopped (libvirt hook): re-read who owns which VF on the next tick."""
        if event.operation not in models.GUEST_OPERATIONS:
            raise BadParameter(f"operation={event.operation!r}: not one of {', '.join(models.GUEST_OPERATIONS)}")
        bad = [pci for pci in event.vfs if not re.match(PCI_ADDRESS, pci)]
        if bad:
            raise BadParameter(f"vfs: {bad[0]!r} is not a PCI address like 0000:03:10.0")
        t = wall_now()
        event_id = store.record_guest_event(t, event.guest, event.uuid, event.operation, event.vfs,
                                            event.source) if store else 0
        agent.request_refresh(f"{event.source}: {event.guest} {event.operation}")
        return {"id": event_id, "t": t, **event.model_dump()}

    @app.get("/v1/events", response_model=list[models.GuestEventOut])
    def guest_events(w: Window = Depends(time_window)) -> Any:
        return store.guest_events(w.since, w.until, w.limit) if store else []

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


__all__ = ["create_app", "parse_time", "PCI_ADDRESS"]
