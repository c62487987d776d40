"""The pyroute2 netlink tables the agent reads replies with, without pyroute2's package __init__.

pyroute2's __init__ imports every module the library has (NDB, IPDB, nftables, WireGuard,
plan9, ...) to offer them as `pyroute2.X`: 160 modules and 11 MB of the agent's resident memory,
for the three modules netlink_vfstats.py uses. Python runs a package's __init__ before any of
its submodules, so the package is put in sys.modules with its __init__ deferred: the first name
asked of `pyroute2` itself (`from pyroute2 import IPRoute`, as the test bed and IPRouteSource do)
runs it then, in the same module object, and from there on it is the package as usual.
"""

from __future__ import annotations

import importlib.util
import sys
import threading


def _is_submodule(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def defer_package_init(package: str) -> None:
    """Register `package` with its __init__ run on the first attribute asked of it.

    Its submodules import as usual meanwhile. Nothing is done if it is imported already."""
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    loader = spec.loader if spec is not None else None
    if spec is None or loader is None or spec.submodule_search_locations is None:
        return  # not an installed package: the import that follows names the problem
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()  # a second thread asking meanwhile waits for the __init__ to end
    ran = False

    def run_init_then_get(name: str) -> object:
        nonlocal ran
        if not ran and _is_submodule(f"{package}.{name}"):
            # `from pyroute2 import config` in a submodule asks for the attribute first
            return importlib.import_module(f"{package}.{name}")
        with lock:
            if not ran:
                ran = True
                try:
                    loader.exec_module(module)
                finally:
                    module.__dict__.pop("__getattr__", None)
        try:
            return module.__dict__[name]
        except KeyError:  # as for any module; also how __init__'s own imports find submodules
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    module.__dict__["__getattr__"] = run_init_then_get
    sys.modules[package] = module


defer_package_init("pyroute2")

from pyroute2.netlink import NLMSG_DONE, NLMSG_ERROR  # noqa: E402
from pyroute2.netlink.rtnl import RTM_NEWLINK  # noqa: E402
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg  # noqa: E402

__all__ = ["NLMSG_DONE", "NLMSG_ERROR", "RTM_NEWLINK", "ifinfmsg", "defer_package_init"]
