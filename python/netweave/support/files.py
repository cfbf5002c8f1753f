"""Writing output files so that a failed write never costs the previous good file.

Every file netweave writes goes through here: the bytes go to a temporary file beside the
target, are flushed to disk, and the temporary file is renamed over the target only once it is
complete. A full disk, a file-size limit (``ulimit -f``) or an interrupted run leaves the old
file as it was and no temporary file behind. Every error names the path the user gave.

Directories are created only one level deep — an output directory whose parent exists — unless
:data:`make_parents` is set (``netweave --mkdir``): a typo in a path should be refused, not
answered with a new directory tree.

Commands that write several files check the whole destination first with :func:`check_dir`
(a file where the directory should be, a directory in the way of one of its files), before
they compute or print anything.

>>> import tempfile, pathlib
>>> scratch = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_text(scratch / "a.txt", "hello\\n")
>>> (scratch / "a.txt").read_text()
'hello\\n'
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Union

from netweave._core import NetweaveError

PathLike = Union[str, "os.PathLike[str]"]

#: Create missing parent directories of an output (``netweave --mkdir``); refused otherwise.
make_parents = False


class OutputError(NetweaveError):
    """An output file or directory cannot be written; the message names its path."""


@contextmanager
def naming(path: PathLike) -> Iterator[None]:
    """Errors raised while reading `path` name it: a parser reports the line, but only the
    caller knows the file (a command reads several). Messages that already name it pass as
    they are; the error keeps its kind."""
    try:
        yield
    except NetweaveError as e:
        text = str(e)
        if str(path) in text or Path(path).name in text:
            raise
        raise type(e)(f"{path}: {text}") from None


def _umask() -> int:
    # The umask can only be read by setting it; done once, before any thread writes files.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def _describe(e: OSError) -> str:
    return e.strerror or str(e)


def _check_parent(path: Path) -> None:
    """The directory `path` goes in exists (or may be made, with :data:`make_parents`)."""
    parent = path.parent
    # Walk up to the first component that exists: it must be a directory, and only with
    # --mkdir may anything below it be missing.
    probe = parent
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():
            raise OutputError(f"cannot write {path}: {probe} is a dangling symbolic link")
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise OutputError(f"cannot write {path}: {probe} is not a directory")
    if probe != parent and not make_parents:
        raise OutputError(f"cannot write {path}: directory {parent} does not exist (create it, or pass --mkdir)")


def check_file(path: PathLike) -> Path:
    """Refuse, before any work, an output file that cannot be written: a directory in its place,
    a missing parent (without :data:`make_parents`), a parent that is a file, or one without
    write permission. Returns the path."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    _check_parent(path)
    parent = path.parent if path.parent.exists() else None
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK) and not _special(path):
        raise OutputError(f"cannot write {path}: permission denied in {parent}")
    return path


def check_dir(path: PathLike, files: Iterable[str] = ()) -> Path:
    """Refuse, before any work, an output directory that cannot take its files: a file where the
    directory should be, a missing parent (without :data:`make_parents`), or a directory (or a
    file, for names ending in ``/``) in the way of one of `files`. Returns the path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"cannot write into {path}: it exists and is not a directory")
    if not path.exists():
        _check_parent(path)
    elif not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write into {path}: permission denied")
    for name in files:
        inside = path / name
        if name.endswith("/"):
            if inside.exists() and not inside.is_dir():
                raise OutputError(f"cannot write into {path}: {inside} is in the way and is not a directory")
        elif inside.is_dir():
            raise OutputError(f"cannot write into {path}: {inside} is a directory")
    return path


def ensure_dir(path: PathLike, files: Iterable[str] = ()) -> Path:
    """:func:`check_dir`, then create the directory (its parents too with :data:`make_parents`)."""
    path = check_dir(path, files)
    try:
        path.mkdir(parents=make_parents, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create directory {path}: {_describe(e)}") from None
    return path


def _special(path: Path) -> bool:
    """An existing target that is not a regular file (``/dev/null``, a FIFO, a terminal): written
    in place, since renaming over it would replace the device."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A temporary path beside `path`, with the same suffix (writers that pick the format from
    the extension still see it), renamed over `path` when the block ends without an error and
    removed otherwise. For writers that only take a path (the Rust engine's)."""
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))  # replace the file the link points at, not the link
    if _special(target):
        yield target
        return
    check_file(target)
    if make_parents:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot create directory {target.parent}: {_describe(e)}") from None
    partial = target.with_name(f".{target.stem}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}{target.suffix}")
    try:
        try:
            yield partial
            if not partial.exists():
                raise OutputError(f"cannot write {path}: the writer produced no file")
            mode = stat.S_IMODE(os.stat(target).st_mode) if target.exists() else _FILE_MODE
            fd = os.open(partial, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.replace(partial, target)
        except OSError as e:
            if e.filename not in (None, str(partial), str(target)):
                raise  # about another file the block was reading: its own name is the right one
            raise OutputError(f"cannot write {path}: {_describe(e)}") from None
        except NetweaveError as e:
            # The engine's own message names the temporary file; the user named the target.
            text = str(e).replace(str(partial), str(path))
            raise type(e)(text) if isinstance(e, OutputError) else OutputError(text) from None
        _sync_dir(target.parent)
    finally:
        with contextlib.suppress(OSError):  # already renamed into place, or never created
            partial.unlink()


def _sync_dir(directory: Path) -> None:
    """Make the rename itself durable (best effort: some file systems refuse to sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def open_atomic(path: PathLike, mode: str = "w", newline: str | None = None,
                encoding: str | None = "utf-8") -> Iterator[IO]:
    """``open(path, mode)`` whose file replaces `path` only once the block ends without error."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as partial, open(partial, mode, newline=newline, encoding=encoding) as f:
        yield f


def write_text(path: PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically; returns the path."""
    with open_atomic(path, "w") as f:
        f.write(text)
    return Path(path)


def write_bytes(path: PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically; returns the path."""
    with open_atomic(path, "wb") as f:
        f.write(data)
    return Path(path)


def write_with(path: PathLike, writer: Callable[[Path], object]) -> Path:
    """Call ``writer(temporary_path)`` (a writer that takes a path, like ``fig.savefig`` or the
    engine's schedule writer), then rename its file over `path`; returns the path."""
    with atomic_path(path) as partial:
        writer(partial)
    return Path(path)


def savefig(fig, path: PathLike, **options) -> Path:
    """``fig.savefig(path, **options)`` atomically (the format follows `path`'s extension)."""
    fmt = options.pop("format", None) or Path(path).suffix.lstrip(".") or None
    return write_with(path, lambda p: fig.savefig(p, format=fmt, **options))
