"""Write the typed stubs of the extension module, ``python/netweave/_core.pyi``.

The names, parameter names and defaults come from the built module itself (PyO3 gives every
function and method a text signature); the types come from the Rust signatures in
``crates/netweave-py/src/*.rs``, mapped as PyO3 converts them (``usize`` → ``int``,
``Option<T>`` → ``T | None``, ``Vec<T>`` → ``list[T]``, ``PyObject`` → ``Any``, …); the
first line of each doc comment becomes the stub's docstring. Run from the checkout with the
extension built::

    .venv/bin/python crates/netweave-py/stubgen.py > python/netweave/_core.pyi

``tests/test_stubs.py`` checks that the file is what this script writes for the current
module, and that mypy accepts it and the code using it.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "src"

#: Rust types as PyO3 hands them to Python.
SCALARS = {
    **{t: "int" for t in ("usize", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "isize")},
    "f32": "float", "f64": "float", "bool": "bool", "String": "str", "str": "str", "char": "str",
    "PathBuf": "str | os.PathLike[str]", "Path": "str | os.PathLike[str]",
    "PyObject": "Any", "PyAny": "Any", "Py<PyAny>": "Any", "PyDict": "dict[str, Any]", "PyList": "list[Any]",
    "PyBytes": "bytes", "()": "None", "Self": "Self",
}

#: `type Name = …;` aliases of the binding sources (filled by `rust_functions`), read through.
ALIASES: dict[str, str] = {}


def python_type(rust: str, classes: dict[str, str]) -> str:
    """The Python type PyO3 gives a Rust parameter or return type."""
    t = re.sub(r"'\w+\s*,?\s*", "", rust).replace("&", "").replace("mut ", "").strip()
    t = re.sub(r"\s+", " ", t)
    for wrapper in ("PyResult", "Bound", "Py", "PyRef", "PyRefMut"):
        m = re.fullmatch(rf"{wrapper}\s*<\s*(.*)\s*>", t)
        if m:
            return python_type(m.group(1), classes)
    m = re.fullmatch(r"Option\s*<\s*(.*)\s*>", t)
    if m:
        return f"{python_type(m.group(1), classes)} | None"
    m = re.fullmatch(r"Vec\s*<\s*(.*)\s*>", t)
    if m:
        inner = python_type(m.group(1), classes)
        return "bytes" if m.group(1).strip() == "u8" and False else f"list[{inner}]"
    m = re.fullmatch(r"\[\s*(.*)\s*\]", t)
    if m:
        return f"list[{python_type(m.group(1), classes)}]"
    m = re.fullmatch(r"\((.*)\)", t)
    if m and t != "()":
        parts = _split_generic(m.group(1))
        return f"tuple[{', '.join(python_type(p, classes) for p in parts)}]"
    m = re.fullmatch(r"(?:HashMap|BTreeMap)\s*<\s*(.*)\s*>", t)
    if m:
        k, v = _split_generic(m.group(1))
        return f"dict[{python_type(k, classes)}, {python_type(v, classes)}]"
    m = re.fullmatch(r"PyArray[12]\s*<\s*(\w+)\s*>|PyReadonlyArray[12]\s*<\s*(\w+)\s*>|PyArray[12]<.*", t)
    if t.startswith(("PyArray", "PyReadonlyArray")):
        return "numpy.ndarray[Any, Any]"
    if t in classes:
        return classes[t]
    if t in ALIASES:
        return python_type(ALIASES[t], classes)
    if t.startswith("PyType"):
        return "type"
    return SCALARS.get(t, "Any")


def _split_generic(text: str) -> list[str]:
    """Split `a, b<c, d>, e` at top-level commas."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def rust_functions() -> tuple[dict[str, dict], dict[str, str]]:
    """Every `fn` of the binding sources: ``{rust name: {params: {name: type}, returns, doc}}``
    keyed by ``Class.fn`` inside a ``#[pymethods] impl``; and the Rust → Python class names."""
    classes: dict[str, str] = {}
    functions: dict[str, dict] = {}
    for path in sorted(SOURCES.glob("*.rs")):
        text = path.read_text()
        for m in re.finditer(r"^\s*(?:pub(?:\(crate\))?\s+)?type\s+(\w+)\s*=\s*([^;]+);", text, re.MULTILINE):
            ALIASES[m.group(1)] = m.group(2).strip()
        for m in re.finditer(r'#\[pyclass\(name\s*=\s*"(\w+)"[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*pub(?:\(crate\))?\s+struct\s+(\w+)', text):
            classes[m.group(2)] = m.group(1)
        for m in re.finditer(r'#\[pyclass\(name\s*=\s*"(\w+)"[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\(crate\))?\s+)?enum\s+(\w+)', text):
            classes[m.group(2)] = m.group(1)
    for path in sorted(SOURCES.glob("*.rs")):
        text = path.read_text()
        impl_spans = [(m.start(), _block_end(text, m.end() - 1), m.group(1))
                      for m in re.finditer(r"#\[pymethods\]\s*impl\s+(\w+)\s*\{", text)]
        for m in re.finditer(r"((?:\s*///[^\n]*\n)*)((?:\s*#\[[^\n]*\]\n)*)\s*(?:pub(?:\(crate\))?\s+)?fn\s+(\w+)\s*(?:<[^>]*>)?\s*\(", text):
            name = m.group(3)
            start = m.end() - 1
            end = _paren_end(text, start)
            params = _params(text[start + 1:end], classes)
            after = text[end + 1:end + 200]
            ret = re.match(r"\s*->\s*([^{]+?)\s*(?:where[^{]*)?\{", after)
            returns = python_type(ret.group(1), classes) if ret else "None"
            doc = " ".join(line.strip()[3:].strip() for line in m.group(1).strip().splitlines())
            owner = next((cls for s, e, cls in impl_spans if s < m.start() < e), None)
            key = f"{classes.get(owner, owner)}.{name}" if owner else name
            attributes = m.group(2)
            functions[key] = {"params": params, "returns": returns, "doc": doc,
                              "getter": "#[getter" in attributes, "static": "#[staticmethod" in attributes,
                              "classmethod": "#[classmethod" in attributes, "new": "#[new" in attributes}
    return functions, classes


def _block_end(text: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _paren_end(text: str, open_paren: int) -> int:
    depth = 0
    for i in range(open_paren, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _params(text: str, classes: dict[str, str]) -> dict[str, str]:
    out = {}
    for part in _split_generic(text):
        if ":" not in part:
            continue  # self, &self
        name, rust = part.split(":", 1)
        name = name.replace("mut ", "").strip()
        if "Python<" in rust:
            continue  # the GIL token is not a Python argument
        out[name] = python_type(rust, classes)
    return out


def _signature(obj, info: dict | None, skip_self: bool) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(self, *args: Any, **kwargs: Any)" if skip_self else "(*args: Any, **kwargs: Any)"
    parts = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls", "$self", "$cls") and not parts:
            continue
        kind = info["params"].get(p.name, "Any") if info else "Any"
        text = f"{p.name}: {kind}"
        if p.default is not inspect.Parameter.empty:
            text += " = ..."
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            text = f"*{p.name}: Any"
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            text = f"**{p.name}: Any"
        elif p.kind is inspect.Parameter.KEYWORD_ONLY and not any(x.startswith("*") for x in parts):
            parts.append("*")
        parts.append(text)
    if skip_self:
        parts.insert(0, "self")
    return "(" + ", ".join(parts) + ")"


def _doc(info: dict | None, indent: str) -> str:
    if not info or not info["doc"]:
        return ""
    first = info["doc"].split(". ")[0].rstrip(".").replace("\\", "\\\\").replace('"""', "'''")
    return f'{indent}"""{first}."""\n'


def generate(module) -> str:
    functions, classes = rust_functions()
    out = ['"""Typed stubs of netweave\'s extension module (written by crates/netweave-py/stubgen.py; do not edit)."""',
           "", "import os", "from typing import Any, Self", "", "import numpy", ""]
    names = sorted(n for n in dir(module) if not n.startswith("_"))
    # Exceptions by the names the module exports them under (the class's own __name__ may differ),
    # each after its base.
    exported = {getattr(module, n): n for n in names if inspect.isclass(getattr(module, n))}
    errors = sorted((n for n in names if inspect.isclass(getattr(module, n)) and issubclass(getattr(module, n), BaseException)),
                    key=lambda n: (len(getattr(module, n).__mro__), n))
    for name in errors:
        parent = getattr(module, name).__mro__[1]
        out += [f"class {name}({exported.get(parent, parent.__name__)}): ...", ""]
    for name in names:
        obj = getattr(module, name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        out.append(f"class {name}:")
        body = []
        for member in sorted(vars(obj)):
            if member.startswith("_") and member not in ("__new__", "__repr__", "__len__", "__eq__", "__hash__", "__str__"):
                continue
            raw = inspect.getattr_static(obj, member)
            info = functions.get(f"{name}.{member}") or functions.get(f"{name}.new" if member == "__new__" else "")
            if type(raw).__name__ == "getset_descriptor":
                kind = (functions.get(f"{name}.{member}") or {"returns": "Any"})["returns"]
                body += ["    @property", f"    def {member}(self) -> {kind}: ...", ""[:0]]
                continue
            if member == "__new__":
                new_info = next((v for k, v in functions.items() if k.startswith(f"{name}.") and v["new"]), None)
                body.append(f"    def __init__{_signature(obj, new_info, True)} -> None: ...")
                continue
            target = getattr(obj, member)
            decorator = ""
            if isinstance(raw, staticmethod) or (info and info["static"]):
                decorator = "    @staticmethod\n"
                sig = _signature(target, info, False)
            elif isinstance(raw, classmethod) or (info and info["classmethod"]) or type(raw).__name__ == "classmethod_descriptor":
                decorator = "    @classmethod\n"
                sig = _signature(target, info, False).replace("(", "(cls, ", 1).replace("(cls, )", "(cls)")
            else:
                sig = _signature(target, info, True)
            returns = info["returns"] if info else "Any"
            if decorator:  # Self means nothing outside an instance or class method
                returns = returns.replace("Self", name)
            if member == "__repr__":
                returns = "str"
            doc = _doc(info, "        ")
            body.append(f"{decorator}    def {member}{sig} -> {returns}:" + (f"\n{doc}        ..." if doc else " ..."))
        out += body or ["    ..."]
        out.append("")
    for name in names:
        obj = getattr(module, name)
        if inspect.isclass(obj) or not callable(obj):
            continue
        info = functions.get(name)
        doc = _doc(info, "    ")
        returns = info["returns"] if info else "Any"
        out.append(f"def {name}{_signature(obj, info, False)} -> {returns}:" + (f"\n{doc}    ..." if doc else " ..."))
    for name in names:
        obj = getattr(module, name)
        if not inspect.isclass(obj) and not callable(obj):
            out.append(f"{name}: {type(obj).__name__}")
    # Import only what the stubs use: the linter reads them like any module.
    if not any(re.search(r"\bSelf\b", line) for line in out[7:]):
        out[3] = "from typing import Any"
    return "\n".join(line for line in out) + "\n"


if __name__ == "__main__":
    import netweave._core

    sys.stdout.write(generate(netweave._core))
