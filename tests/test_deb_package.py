"""scripts/build-deb: the Debian package an operator installs, built once and taken apart.

The package is built for real (pip, dpkg-deb), checked by Debian's lintian, unpacked with
dpkg-deb -x, and its venv run from the unpacked tree: a venv's interpreter finds its prefix from
the path it is started by, so `<tree>/opt/vftune/bin/python <tree>/opt/vftune/bin/vftune` runs the
packaged code exactly as /usr/bin/vftune would after `apt install`.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import tomllib
import warnings
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path

import pytest

from vftune.cli import COMMAND_MODULES

REPO = Path(__file__).resolve().parent.parent
PREFIX = "opt/vftune"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("dpkg-deb") is None or shutil.which("lintian") is None,
        reason="needs dpkg-deb and lintian (scripts/setup --test installs dpkg-dev and lintian)",
    ),
]


@dataclass
class Package:
    deb: Path
    tree: Path  # dpkg-deb -x of the package
    control: Path  # dpkg-deb -e of the package

    def run_vftune(self, *args: str) -> subprocess.CompletedProcess[str]:
        venv = self.tree / PREFIX
        return subprocess.run(
            [str(venv / "bin/python"), str(venv / "bin/vftune"), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.tree,
            env=clean_env(),
        )


def clean_env() -> dict[str, str]:
    """No trace of the test's own venv: the packaged interpreter must find everything itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = "/usr/bin:/bin"
    return env


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Package:
    out = tmp_path_factory.mktemp("deb")
    built = subprocess.run(
        [str(REPO / "scripts/build-deb"), str(out / "dist")],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert built.returncode == 0, built.stderr
    deb = Path(built.stdout.strip().splitlines()[-1])
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    assert deb.name == f"vftune_{project_version()}_{arch}.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(out / "tree")], check=True)
    subprocess.run(["dpkg-deb", "-e", str(deb), str(out / "control")], check=True)
    return Package(deb, out / "tree", out / "control")


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def control_fields(package: Package) -> dict[str, str]:
    fields = {}
    for line in (package.control / "control").read_text().splitlines():
        if line and not line[0].isspace():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def site_packages(package: Package) -> Path:
    (site,) = (package.tree / PREFIX / "lib").glob("python3*/site-packages")
    return site


def test_lintian_reports_no_errors(package: Package) -> None:
    result = subprocess.run(["lintian", str(package.deb)], check=False, capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stdout.splitlines() if line.startswith("E: ")]
    assert errors == [], "\n".join(errors)
    # Warnings do not fail the build (a new dependency may bring some) but show in the summary.
    for line in result.stdout.splitlines():
        if line.startswith("W: "):
            warnings.warn(f"lintian: {line}", stacklevel=1)


def test_packaged_vftune_runs_from_the_unpacked_tree(package: Package) -> None:
    version = package.run_vftune("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"vftune, version {project_version()}"
    # The code that ran is the package's, not this checkout's.
    python = package.tree / PREFIX / "bin/python"
    where = subprocess.run(
        [str(python), "-c", "import vftune; print(vftune.__file__)"],
        capture_output=True,
        text=True,
        cwd=package.tree,
        env=clean_env(),
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site_packages(package))
    # The whole agent (simulator, store, API server) runs from the package and stops cleanly.
    db = package.tree / "run.db"
    run = package.run_vftune(
        "run", "--sim", "paper-1vm", "--speed", "10", "--for", "2", "--listen", "127.0.0.1:0", "--db", str(db)
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert db.stat().st_size > 0


def test_entry_points_name_the_installed_prefix(package: Package) -> None:
    bin_dir = package.tree / PREFIX / "bin"
    assert (bin_dir / "vftune").read_text().splitlines()[0] == "#!/opt/vftune/bin/python"
    assert os.readlink(package.tree / "usr/bin/vftune") == "/opt/vftune/bin/vftune"
    assert os.readlink(bin_dir / "python3") == "/usr/bin/python3"
    cfg = (package.tree / PREFIX / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = true" in cfg
    assert "/opt/vftune" in cfg and "tmp" not in cfg


def test_libvirt_comes_from_debian_not_a_compiled_copy(package: Package) -> None:
    assert "python3-libvirt" in control_fields(package)["Depends"]
    names = {d.metadata["Name"].lower() for d in distributions(path=[str(site_packages(package))])}
    assert "libvirt-python" not in names
    if not Path("/usr/lib/python3/dist-packages/libvirt.py").exists():
        pytest.skip("python3-libvirt is not installed here (scripts/setup --test installs it)")
    python = package.tree / PREFIX / "bin/python"
    found = subprocess.run(
        [str(python), "-c", "import libvirt; print(libvirt.__file__)"],
        check=False,
        capture_output=True,
        text=True,
        cwd=package.tree,
        env=clean_env(),
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "/usr/lib/python3/dist-packages/libvirt.py"


def test_dependencies_are_exactly_the_lock(package: Package) -> None:
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            locked[name] = version
    shipped = {
        re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
        for d in distributions(path=[str(site_packages(package))])
    }
    assert shipped.pop("vftune") == project_version()
    assert shipped == locked


def test_etc_files_are_conffiles(package: Package) -> None:
    conffiles = (package.control / "conffiles").read_text().split()
    under_etc = sorted("/" + str(p.relative_to(package.tree)) for p in (package.tree / "etc").rglob("*") if p.is_file())
    assert conffiles == under_etc
    assert "/etc/default/vftune" in conffiles
    assert "/etc/libvirt/hooks/qemu.d/vftune" in conffiles
    assert (package.tree / "etc/vftune").is_dir()
    default_config = REPO / "docs/vftune.toml"
    if default_config.exists():  # the package's default config, once the repository has one
        assert (package.tree / "etc/vftune/vftune.toml").read_text() == default_config.read_text()
    assert "VFTUNE_ARGS=" in (package.tree / "etc/default/vftune").read_text()


def test_unit_runs_the_packaged_agent_and_stops_it_with_sigterm(package: Package) -> None:
    unit = (package.tree / "lib/systemd/system/vftune.service").read_text()
    service = dict(
        line.split("=", 1) for line in unit.split("[Service]")[1].split("[Install]")[0].splitlines() if "=" in line
    )
    assert service["ExecStart"].startswith("/opt/vftune/bin/vftune run --db /var/lib/vftune/vftune.db")
    assert service["EnvironmentFile"] == "-/etc/default/vftune"
    assert service["KillSignal"] == "SIGTERM"
    assert service["StateDirectory"] == "vftune"
    assert "Documentation=man:vftune(1)" in unit
    assert ".venv" not in unit


def test_libvirt_hook_runs_the_packaged_cli(package: Package) -> None:
    hook = package.tree / "etc/libvirt/hooks/qemu.d/vftune"
    assert os.access(hook, os.X_OK)
    assert 'exec /opt/vftune/bin/vftune hook "$@" || exit 0' in hook.read_text()


def test_maintainer_scripts_stop_the_agent_and_purge_state(package: Package) -> None:
    prerm = (package.control / "prerm").read_text()
    postrm = (package.control / "postrm").read_text()
    postinst = (package.control / "postinst").read_text()
    assert "deb-systemd-invoke stop vftune.service" in prerm
    assert "daemon-reload" in postinst
    assert "rm -rf /var/lib/vftune" in postrm.split("purge)")[1]
    for script in ("postinst", "prerm", "postrm"):
        assert subprocess.run(["sh", "-n", str(package.control / script)], check=False).returncode == 0


def test_no_bytecode_or_pip_shipped(package: Package) -> None:
    venv = package.tree / PREFIX
    assert not list(venv.rglob("__pycache__")) and not list(venv.rglob("*.pyc"))
    assert not list(site_packages(package).glob("pip"))
    assert sorted(p.name for p in (venv / "bin").iterdir()) == ["activate", "python", "python3", "python3.11", "vftune"]


def test_man_page_documents_every_command_and_renders_cleanly(package: Package) -> None:
    page = package.tree / "usr/share/man/man1/vftune.1.gz"
    roff = gzip.decompress(page.read_bytes()).decode()
    for name in COMMAND_MODULES:
        assert f'.SS "vftune {name}' in roff
    assert "\\-\\-sim" in roff and "\\-\\-pf\\-mode" in roff  # `vftune run`'s options
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    rendered = subprocess.run(
        ["man", "--warnings", "-l", str(page)],
        check=False,
        capture_output=True,
        text=True,
        env={**clean_env(), "MANWIDTH": "100", "LC_ALL": "C.UTF-8"},
    )
    assert rendered.returncode == 0
    assert rendered.stderr == ""
    assert "vftune sim sweep" in rendered.stdout


def test_bash_completion_completes_subcommands_and_options(package: Package, tmp_path: Path) -> None:
    completion = package.tree / "usr/share/bash-completion/completions/vftune"
    assert (package.tree / "usr/share/zsh/vendor-completions/_vftune").exists()
    assert (package.tree / "usr/share/fish/vendor_completions.d/vftune.fish").exists()
    # The script calls `vftune` from PATH, as /usr/bin/vftune is after install.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    venv = package.tree / PREFIX
    (bin_dir / "vftune").write_text(f'#!/bin/sh\nexec {venv}/bin/python {venv}/bin/vftune "$@"\n')
    (bin_dir / "vftune").chmod(0o755)

    def complete(*words: str) -> list[str]:
        script = (
            f"source {completion}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
            '_vftune_completion vftune; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        env = {**clean_env(), "PATH": f"{bin_dir}:/usr/bin:/bin"}
        done = subprocess.run(["bash", "-c", script], check=False, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("vftune", "ru") == ["run"]
    assert complete("vftune", "sim", "sw") == ["sweep"]
    assert "--pf-mode" in complete("vftune", "run", "--pf")
