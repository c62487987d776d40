"""The agent's rules over the API: GET lists every rule in match order with its source (the
config file, a drop-in, or "api"); PUT replaces the API's rules, checked as a file's
[[rule]]s are, kept in the state directory and applied at the next tick. Token required both
ways: the rules name guests, and a bad PUT would steer every VF."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol, runtime_checkable

from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import AgentHandle, agent


@runtime_checkable
class RulesHandle(Protocol):
    def list_rules(self) -> list[dict[str, Any]]: ...

    def put_api_rules(self, body: object) -> list[dict[str, Any]]: ...


def _rules(handle: AgentHandle) -> RulesHandle:
    if not isinstance(handle, RulesHandle):
        raise StarletteHTTPException(404, "this agent takes no rules")
    return handle


RULES_EXAMPLE = {"rules": [{"match": {"uuid": "6f9619ff-8b86-d011-b42d-00c04fc964ff"}, "objective": "latency",
                            "max_interval_us": 100},
                           {"match": {"guest": "batch-*"}, "pin_itr": 8000}]}


RulesBody = Annotated[Any, Body(
    examples=[RULES_EXAMPLE],
    description='{"rules": [...]}: each rule a [[rule]] table\'s keys (match, objective, max_interval_us, '
                'margin, pin_itr, exclude); match by guest, uuid, vf or pf. [] removes the API\'s rules')]


def make_router(auth: Callable[..., None]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(auth)])
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": models.ErrorBody} for code in (400, 401, 403, 404, 413, 422)}

    @router.get("/v1/rules", response_model=models.RulesOut, responses=errors)
    def get_rules(handle: AgentHandle = Depends(agent)) -> Any:
        """Every rule in the order the agent matches them (the first match wins): the API's,
        then the config file's, then its drop-ins', each with its source."""
        return {"rules": _rules(handle).list_rules()}

    @router.put("/v1/rules", response_model=models.RulesOut, responses=errors)
    def put_rules(body: RulesBody, handle: AgentHandle = Depends(agent)) -> Any:
        """Replace the API's rules; they apply at the next tick and survive a restart. A body
        with problems changes nothing: a 422 lists every problem."""
        try:
            listed = _rules(handle).put_api_rules(body)
        except ValueError as exc:
            problems = str(exc).splitlines()
            return JSONResponse({"error": problems[0] if len(problems) == 1 else
                                 f"{len(problems)} problems: {problems[0]} ...", "problems": problems},
                                status_code=422)
        return {"rules": listed}

    return router
