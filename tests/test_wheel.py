"""netweave as a package: the wheel `make wheel` builds, installed into a fresh virtual
environment in a temporary directory outside the checkout, runs `netweave run` on loopback and
`netweave mpi run` with the C programs and MPI libraries it ships, and says which MPI is missing
when its library is not there.

Nothing is downloaded: the fresh environment takes netweave from the wheel (``pip install
--no-index --no-deps``) and its dependencies (numpy, typer, …) from this test's own environment
through a ``.pth`` line, which Python reads after the environment's own site-packages, so the
installed netweave, not the checkout's, is the one imported (checked). Everything lives in a
temporary directory removed at the end, pass or fail. ``NETWEAVE_TEST_WHEEL`` may name a wheel
already built by ``make wheel`` to test instead of building one.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT = 1800  # s: a release build of the extension when nothing is cached
RUN_TIMEOUT = 300  # s, one command in the fresh environment


@pytest.fixture(scope="module")
def installed():
    """A fresh venv with the wheel installed: ``{"python", "netweave", "env", "work"}``."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make and a C compiler are needed to build the wheel")
    temp = Path(tempfile.mkdtemp(prefix="netweave-wheel-"))
    try:
        prebuilt = os.environ.get("NETWEAVE_TEST_WHEEL")  # a wheel `make wheel` already built, to test as it is
        if prebuilt:
            wheel = Path(prebuilt)
        else:
            wheels = temp / "wheels"
            build = subprocess.run(["make", "--no-print-directory", "wheel", f"WHEEL_DIR={wheels}"], cwd=CHECKOUT,
                                   capture_output=True, text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL)
            assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
            (wheel,) = wheels.glob("netweave-*.whl")
            assert not (CHECKOUT / "python" / "netweave" / "_runtime").exists(), "make wheel leaves the checkout clean"

        venv = temp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=RUN_TIMEOUT)
        python = venv / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True, timeout=RUN_TIMEOUT).stdout.strip()
        # The dependencies, from this environment: read after the venv's own site-packages.
        ours = [p for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()} if Path(p).is_dir()]
        (Path(purelib) / "zz_netweave_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
        install = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
                                  "--disable-pip-version-check", str(wheel)],
                                 capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert install.returncode == 0, install.stderr[-3000:]
        work = temp / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NETWEAVE_RUNTIME_DIR", "VIRTUAL_ENV")}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["COLUMNS"] = "200"
        yield {"python": python, "netweave": venv / "bin" / "netweave", "env": env, "work": work, "wheel": wheel,
               "site": Path(purelib)}
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _run(inst: dict, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          cwd=inst["work"], env=env or inst["env"], stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_installed_package_is_the_wheel_with_its_runtime(installed):
    out = _run(installed, installed["python"], "-c",
               "import json, netweave, netweave.run.executor as r, netweave.run.mpi as m;"
               "print(json.dumps([netweave.__file__, str(r.executor_path()), str(m.library_path('openmpi'))]))").stdout
    package, executor, library = (Path(p) for p in json.loads(out))
    site_dir = installed["site"]
    for path in (package, executor, library):
        assert site_dir in path.parents, f"{path} is not inside the fresh environment {site_dir}"
    assert executor.parent.name == "_runtime" and os.access(executor, os.X_OK)
    # Editors and mypy find the extension's types in the installed package.
    assert (site_dir / "netweave" / "_core.pyi").is_file() and (site_dir / "netweave" / "py.typed").is_file()


def test_netweave_run_on_loopback_from_the_wheel(installed):
    nw = installed["netweave"]
    _run(installed, nw, "schedule", "alltoall", "--ranks", "4", "--algo", "shift", "--bytes", "65536", "-o", "a.nws")
    result = json.loads(_run(installed, nw, "run", "a.nws", "--out", "run", "--json").stdout)
    assert result["ok"] is True, result
    assert (installed["work"] / "run" / "result.json").is_file()


@pytest.mark.parametrize("implementation", ["openmpi", "mpich"])
def test_mpi_run_uses_the_shipped_library(installed, implementation):
    launcher = {"openmpi": "mpirun.openmpi", "mpich": "mpiexec.mpich"}[implementation]
    if shutil.which(launcher) is None:
        pytest.skip(f"{launcher} is not installed")
    nw, python = installed["netweave"], installed["python"]
    _run(installed, nw, "mpi", "schedules", "--ranks", "2-4", "--out", "sched", "--collectives", "alltoall")
    nwcheck = _run(installed, python, "-c",
                   f"import netweave.run.mpi as m; print(m.program_path('nwcheck', '{implementation}'))").stdout.strip()
    assert installed["site"] in Path(nwcheck).parents
    proc = _run(installed, nw, "mpi", "run", "-np", "3", "--mpi", implementation, "--schedule", "sched", "--verbose",
                "--", nwcheck, "--collective", "alltoall", "--counts", "1,100", "--types", "int")
    assert json.loads(proc.stdout.strip().splitlines()[-1])["mismatches"] == 0
    assert "runs 'alltoall-shift(N=3)'" in proc.stderr, proc.stderr[-2000:]


def test_a_missing_mpi_is_named_in_one_line(installed, tmp_path):
    """A wheel built where MPICH was absent ships no MPICH library: one line naming MPICH, exit 2."""
    only_tcp = tmp_path / "runtime"
    only_tcp.mkdir()
    executor = _run(installed, installed["python"], "-c", "import netweave.run.executor as r; print(r.executor_path())").stdout
    shutil.copy2(executor.strip(), only_tcp / "nw-tcp-run")
    env = {**installed["env"], "NETWEAVE_RUNTIME_DIR": str(only_tcp)}
    proc = _run(installed, installed["netweave"], "mpi", "run", "-np", "2", "--mpi", "mpich", "--schedule", ".", "--",
                "true", check=False, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "MPICH" in proc.stderr and "libnwmpi-mpich.so" in proc.stderr
    # The TCP runtime still works from that directory.
    _run(installed, installed["netweave"], "schedule", "gather", "--ranks", "3", "--algo", "binomial", "-o", "g.nws",
         env=env)
    assert json.loads(_run(installed, installed["netweave"], "run", "g.nws", "--json", env=env).stdout)["ok"] is True


def test_mpi_bench_and_emulate_measure_from_the_wheel(installed):
    """The other two real-run commands work from the installed package: `mpi bench` with the shipped
    nwbench, and `emulate measure` on namespaces (root only), which leaves no namespace behind."""
    nw = installed["netweave"]
    _run(installed, nw, "topo", "tree", "--fanouts", "2", "--hosts-per-switch", "2", "-o", "t.json")
    _run(installed, nw, "route", "updown", "t.json", "-o", "r.json")
    _run(installed, nw, "schedule", "alltoall", "t.json", "--algo", "shift", "--bytes", "4096", "-o", "s.json")
    _run(installed, nw, "schedule", "alltoall", "t.json", "--algo", "shift", "--bytes", "4096", "-o", "s.nws")
    if shutil.which("mpirun.openmpi") is not None:
        _run(installed, nw, "mpi", "bench", "s.nws", "-np", "4", "--collective", "alltoall", "--sizes", "4096",
             "--out", "bench")
        rows = json.loads((installed["work"] / "bench" / "bench.json").read_text())
        assert rows, "mpi bench wrote no measurement"
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("emulate needs root and iproute2")
    name = "w" + uuid.uuid4().hex[:10]
    try:
        out = _run(installed, nw, "emulate", "measure", "t.json", "r.json", "s.json", "--name", name,
                   "--scale", "0.01", "--out", "measure").stdout
        assert "every channel carried its routed bytes" in out, out
    finally:
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert name not in left, f"namespaces of {name} were left behind"
