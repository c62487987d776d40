"""The libvirt transport on libvirt's test driver: it has domains but no guest agent, so every
call is a clear "absent" (the real qemuAgentCommand path, up to the driver)."""

from __future__ import annotations

import time

import pytest

from vftune.hostdriver.linux.guest_agent import AgentError, GuestAgentActuator, GuestVf, LibvirtChannel, Limits
from vftune.hostdriver.linux.guest_agent.actuator import libvirt_connector

libvirt = pytest.importorskip("libvirt", reason="libvirt-python is not installed")


@pytest.fixture
def conn():  # type: ignore[no-untyped-def]
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    c = libvirt.open("test:///default")
    yield c
    c.close()


def test_qemu_agent_command_on_a_driver_without_agents_is_absent(conn) -> None:  # type: ignore[no-untyped-def]
    chan = LibvirtChannel(conn.lookupByName("test"))
    with pytest.raises(AgentError) as err:
        chan.command("guest-ping", None, 0.5)
    assert err.value.kind == "absent"
    assert str(err.value) == ("guest test: guest-ping: this function is not supported by the connection driver: "
                              "virDomainQemuAgentCommand")


def test_actuator_over_libvirt_reports_why_a_vf_has_no_actuator(conn) -> None:  # type: ignore[no-untyped-def]
    act = GuestAgentActuator(libvirt_connector(lambda: conn), limits=Limits(call_timeout_s=1.0))
    try:
        act.attach(GuestVf("0000:03:10.0", "test", "52:54:00:00:00:00"))
        act.attach(GuestVf("0000:03:10.2", "no-such-guest", "52:54:00:00:00:01"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = [act.status(p) for p in ("0000:03:10.0", "0000:03:10.2")]
            if all(s is not None and s.reason != "guest agent not checked yet" for s in states):
                break
            time.sleep(0.01)
        here, gone = (act.status(p) for p in ("0000:03:10.0", "0000:03:10.2"))
        assert here is not None and here.actuator == "none"
        assert here.reason.endswith("not supported by the connection driver: virDomainQemuAgentCommand")
        assert gone is not None and gone.actuator == "none"
        assert gone.reason.startswith("guest no-such-guest: Domain not found")
    finally:
        act.close()


def test_no_libvirt_connection_is_absent() -> None:
    with pytest.raises(AgentError) as err:
        libvirt_connector(lambda: None)("vm-web0")
    assert err.value.kind == "absent" and str(err.value) == "guest vm-web0: libvirt is not connected"
