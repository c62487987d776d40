"""Under systemd: READY=1 once the API serves, WATCHDOG=1 from the tick loop, STOPPING=1 on SIGTERM
(the sd_notify protocol over $NOTIFY_SOCKET, received here on a real datagram socket)."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from conftest import VFTUNE


def test_the_agent_notifies_systemd_and_pets_the_watchdog_from_its_tick_loop(tmp_path):
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    env = {**os.environ, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"}  # pet every <= 0.2 s
    proc = subprocess.Popen([*VFTUNE, "run", "--sim", "--speed", "50", "--interval", "0.1", "--db",
                             str(tmp_path / "v.db"), "--listen", "127.0.0.1:0"], env=env,
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and seen.count("WATCHDOG=1") < 3:
            seen.append(sock.recv(4096).decode())
        assert seen[0].startswith("READY=1"), seen
        assert seen.count("WATCHDOG=1") >= 3
        proc.terminate()
        assert "STOPPING=1" in sock.recv(4096).decode() or "STOPPING=1" in sock.recv(4096).decode()
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        sock.close()
