"""The typed stubs of the extension module (``python/netweave/_core.pyi``, written by
``crates/netweave-py/stubgen.py``): every name they promise exists in the built module with the
same parameters, and mypy accepts them and the modules that use them — and rejects a call
with a wrong type, so the types are real."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from netweave import _core

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "netweave"
STUB = PACKAGE / "_core.pyi"
MYPY_TIMEOUT = 600  # s


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def _parameters(node: ast.FunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return [n for n in names if n not in ("self", "cls")]


def _runtime_parameters(obj) -> list[str] | None:
    try:
        return [p.name for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls", "$self", "$cls")
                and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return None


def test_the_stubs_promise_only_what_the_module_has():
    tree = _stub_tree()
    promised = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            promised.add(node.name)
            assert hasattr(_core, node.name), f"the stub declares {node.name}(), the module has none"
            assert _parameters(node) == _runtime_parameters(getattr(_core, node.name)), node.name
        elif isinstance(node, ast.ClassDef):
            promised.add(node.name)
            assert hasattr(_core, node.name), f"the stub declares class {node.name}, the module has none"
            cls = getattr(_core, node.name)
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and member.name != "__init__":
                    assert hasattr(cls, member.name), f"{node.name}.{member.name}"
                    if not any(isinstance(d, ast.Name) and d.id == "property" for d in member.decorator_list):
                        got = _runtime_parameters(getattr(cls, member.name))
                        if got is not None:
                            assert _parameters(member) == got, f"{node.name}.{member.name}"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            promised.add(node.target.id)
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert len(promised & public) >= 0.9 * len(public), "most of the module is typed"
    missing = sorted(public - promised)
    if missing:  # a binding added since the stubs were written: regenerate them
        warnings.warn(f"_core.pyi lacks {', '.join(missing)}: run crates/netweave-py/stubgen.py", stacklevel=1)


def _mypy(*paths: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    # Imports outside the files named are not followed (third-party code is not what is checked
    # here); the stub itself is always named, so every use of netweave._core is typed by it.
    cmd = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=skip", "--no-incremental",
           "--python-version", "3.11", "netweave/_core.pyi", *paths]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=MYPY_TIMEOUT, cwd=PACKAGE.parent)


def test_mypy_accepts_the_stubs_and_their_users():
    proc = _mypy("netweave/stages/routing.py", "netweave/cli/route.py", "netweave/cli/schedule.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_rejects_a_wrong_call(tmp_path):
    good = "from netweave import _core\nt = _core.torus([4, 4], 1)\nr: _core.RoutingTable = _core.route(t, 'dor', 2)\nn: int = r.num_vcs\n"
    (tmp_path / "good.py").write_text(good)
    (tmp_path / "bad.py").write_text(good + "_core.route(t, 5)\n")
    ok = _mypy(str(tmp_path / "good.py"))
    assert ok.returncode == 0, ok.stdout
    proc = _mypy(str(tmp_path / "bad.py"))
    assert proc.returncode == 1 and 'incompatible type "int"; expected "str"' in proc.stdout, proc.stdout
