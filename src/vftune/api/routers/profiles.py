"""The host's workload memory (the best ITR per workload class, per VF and for the host), so an
orchestrator can copy it from one host of a fleet to a new one. Token required both ways: the
memory tells what the guests run, and a bad import would steer every VF."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, Depends
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import AgentHandle, BadParameter, agent


@runtime_checkable
class ProfilesHandle(Protocol):
    def export_profiles(self) -> dict[str, Any] | None: ...

    def import_profiles(self, data: object) -> int: ...


def _memory(handle: AgentHandle) -> ProfilesHandle:
    if not isinstance(handle, ProfilesHandle):
        raise StarletteHTTPException(404, "this agent keeps no workload memory")
    return handle


def make_router(auth: Callable[..., None]) -> APIRouter:
    """The /v1/profiles routes behind `auth` (the API's bearer-token dependency)."""
    router = APIRouter(dependencies=[Depends(auth)])

    @router.get("/v1/profiles", response_model=models.ProfilesRecord,
                responses={401: {"model": models.ErrorBody}, 403: {"model": models.ErrorBody},
                           404: {"model": models.ErrorBody}})
    def get_profiles(handle: AgentHandle = Depends(agent)) -> Any:
        """The best ITR found per workload class (kind/size/mix/rate decade), per VF and for the host."""
        record = _memory(handle).export_profiles()
        if record is None:
            raise StarletteHTTPException(404, "the VF policy keeps no workload memory (run with --policy search)")
        return record

    @router.put("/v1/profiles", response_model=models.ProfilesImported,
                responses={400: {"model": models.ErrorBody}, 401: {"model": models.ErrorBody},
                           403: {"model": models.ErrorBody}, 404: {"model": models.ErrorBody},
                           413: {"model": models.ErrorBody}, 422: {"model": models.ErrorBody}})
    def put_profiles(record: models.ProfilesRecord, handle: AgentHandle = Depends(agent)) -> Any:
        """Merge a record (from another host's GET): its classes replace this host's; the VFs
        jump to an imported class's setting the next time their load shows that class."""
        memory = _memory(handle)
        try:
            imported = memory.import_profiles(record.model_dump())
        except LookupError as exc:
            raise StarletteHTTPException(404, str(exc)) from None
        except ValueError as exc:
            raise BadParameter(str(exc)) from None
        return {"imported": imported, "profiles": memory.export_profiles()}

    return router
