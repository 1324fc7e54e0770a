"""Files: atomic writes, checksums, file modes and line reading, shared by the cache, the results and the
reports. Pure standard library.

Example:
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.json"
    >>> atomic_write_json(p, {"x": 1}); p.read_text()
    '{\\n  "x": 1\\n}'
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any

from iso_bench.faults import check_space, fault_point
from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)
_WARNED: set[str] = set()  # the caches this process has said it cannot write to


def cache_not_written(path: Path, exc: OSError, what: str = "raw vectors") -> None:
    """Say once per process and cache that a cache file could not be written: the run goes on with what it
    holds in memory (nothing computed is lost), and says where and what to do. A cache is a saving of time,
    never a condition of a result: its writers call this instead of stopping the run."""
    root = str(Path(path).parent)
    if root in _WARNED:
        return
    _WARNED.add(root)
    why = "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    logger.warning("cannot write the %s cache at %s (%s): the run goes on with what it holds in memory and writes "
                   "its results, but a later run computes them again; free space there or point --cache-dir "
                   "(ISO_BENCH_CACHE) at a disk with room", what, root, why)


STALE_AFTER = 3600.0
"""Seconds after its last write from which a temporary file whose writer cannot be asked (another host's, or a
name without a host) counts as left by a writer that died."""


def host_name() -> str:
    """This machine's name as temporary names carry it: ``socket.gethostname()`` with every character other
    than letters, digits, ``.`` and ``-`` replaced by ``_`` (never ``@``, which delimits it)."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "unknown-host"


def temporary_name(path: Path) -> str:
    """The prefix of :func:`replacing`'s temporary files for ``path``: ``.<name>@<host>@<pid>-``, so that the
    next run can tell the files of a writer that died (:func:`remove_stale_temporaries`), and a node of a
    cluster never takes the pid of another node's writer for one of its own processes."""
    return f".{Path(path).name}@{host_name()}@{os.getpid()}-"


def remove_stale_temporaries(folder: Path, stale_after: float = STALE_AFTER) -> list[Path]:
    """Delete the temporary files of :func:`replacing` in ``folder`` whose writer is gone. A file written on
    this host (the host in its name) is judged by its writer's pid: deleted when that process no longer runs,
    kept while it does. Any other is judged by age, deleted only when last written more than ``stale_after``
    seconds ago: another host's (on a shared file system its pid says nothing here, and its writer may be
    alive), and the names of earlier versions (``.<name>-<pid>-*.tmp``, no host: the writer may be another
    node's; ``.tmp-*``, no pid). Returns what was deleted."""
    gone = []
    here = host_name()
    for tmp in {*Path(folder).glob(".*.tmp"), *Path(folder).glob(".tmp-*")}:
        host, pid = _writer(tmp.name)
        try:
            if host == here and pid is not None:
                stale = not _alive(pid)
            else:
                stale = time.time() - tmp.stat().st_mtime > stale_after
            if stale:
                tmp.unlink()
                gone.append(tmp)
        except FileNotFoundError:  # renamed into place or removed meanwhile by the write that made it
            pass
    return gone


def _writer(name: str) -> tuple[str | None, int | None]:
    """``(host, pid)`` of a temporary name ``.<target>@<host>@<pid>-<random>.tmp``; ``(None, pid)`` for an
    earlier version's ``.<target>-<pid>-<random>.tmp``; ``(None, None)`` where neither is there."""
    stem = name.removesuffix(".tmp").rpartition("-")[0]  # mkstemp's random part holds no "-"
    parts = stem.rsplit("@", 2)
    if len(parts) == 3 and parts[1] and parts[2].isdigit():
        return parts[1], int(parts[2])
    parts = name.removesuffix(".tmp").rsplit("-", 2)
    return None, int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class NotARegularFile(IsoBenchError, OSError):
    """A whole-file write aimed at something that is not a regular file (a FIFO, a device, a folder, a socket):
    a temporary file renamed over it would replace it, and a reader of a FIFO or a device would get nothing."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(path: Path) -> str | None:
    """What ``path`` is, following symlinks, as a message says it (``"a regular file"``, ``"a folder"``, ``"a
    FIFO (named pipe)"``, ``"a character device"``, ...); None when nothing is there (a dangling link included).

    >>> file_kind(Path("/")), file_kind(Path("/no/such/file"))
    ('a folder', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file where a folder is meant above it
        return None
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def write_target(path: Path) -> Path:
    """The file a whole-file write of ``path`` (:func:`replacing`) replaces: ``path`` itself when it is a regular
    file or nothing is there; for a symlink, the file it points to (every link followed: the link stays, its
    target gets the new bytes), by the same rule. Anything else raises :class:`NotARegularFile`, naming it, what
    it is, and what to do: a temporary file renamed over a FIFO or a device would replace it, and its reader
    would never get the data."""
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    kind = file_kind(target)
    if kind in (None, "a regular file"):
        return target
    through = f" (the symlink's target {target})" if target != path else ""
    raise NotARegularFile(f"{path}: is {kind}{through}, not a regular file, and is never replaced; give the path "
                          "of a regular file (or of none yet)")


def written_to(path: Path) -> str:
    """``path`` as a message that it was written says it: a symlink with the file it was written through to."""
    path = Path(path)
    return f"{path} (a symlink: written through to {os.path.realpath(path)})" if path.is_symlink() else str(path)


def process_umask() -> int:
    """This process's umask, read from ``/proc/self/status`` without changing it (setting it to read it back races
    with other threads' file creation); where that cannot be read, set and restored."""
    with suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would create (``mkstemp`` uses 0o600)."""
    return 0o666 & ~process_umask()


@contextmanager
def replacing(path: Path, *, copy: bool = False) -> Iterator[Path]:
    """A temporary file beside ``path`` (``copy``: starting as a copy of it) that replaces ``path`` when the
    block ends without an error, synced to disk first: a reader sees the old file or the new one, never a
    part. A symlink is written through (its target replaced, the link kept); what is neither a regular file
    nor absent is refused before anything is written (:func:`write_target`). Its name,
    ``.<name>@<host>@<pid>-XXXX.tmp``, matches no glob for results (``*.json``) or shards (``*.npz``), and tells
    the next run on the same host whether its writer is still alive (:func:`remove_stale_temporaries`)."""
    path = write_target(path)
    check_space(path)  # tests: a full disk (ISO_BENCH_FULL_DISK)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path), suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        if copy and path.is_file():
            shutil.copyfile(path, tmp)
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes | memoryview, *, fault: str | None = None) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`replacing`). ``fault`` names the crash-test
    point (:mod:`iso_bench.faults`) reached when half of the bytes are written."""
    with replacing(path) as tmp, open(tmp, "wb") as f:
        if fault is None:
            f.write(data)
        else:
            half = len(data) // 2
            f.write(data[:half])
            f.flush()
            fault_point(fault)
            f.write(data[half:])


def atomic_write_text(path: Path, text: str, *, fault: str | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), fault=fault)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2))


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 over the texts in order, each followed by a newline (the fit corpus record's ``texts_sha256``).
    A tuple's digest is kept for the next call with an equal tuple: every variant of a run records (and keys its
    fits by) the same fit corpora.

    >>> texts_digest(("a", "b")) == hashlib.sha256(b"a\\nb\\n").hexdigest() == texts_digest(["a", "b"])
    True
    """
    return _tuple_digest(texts) if isinstance(texts, tuple) else _digest_of(texts)


@lru_cache(maxsize=8)  # a run's fit corpora, task by task
def _tuple_digest(texts: tuple[str, ...]) -> str:
    return _digest_of(texts)


def _digest_of(texts: Iterable[str]) -> str:
    h, it = hashlib.sha256(), iter(texts)
    while chunk := list(islice(it, 4096)):  # one update per 4,096 texts
        h.update(("\n".join(chunk) + "\n").encode("utf-8"))
    return h.hexdigest()


def _folder_hash(folder: Path, h: Any, separator: bytes) -> str:
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + separator)
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=256)
def folder_checksum(folder: Path) -> str:
    """SHA-256 over the relative paths and contents of every file in ``folder`` (a dataset's ``sha256``)."""
    return _folder_hash(folder, hashlib.sha256(), b"\x00")


def folder_revision(folder: Path) -> str:
    """``local-<SHA-1>`` of a local model folder's files, used as its revision."""
    return "local-" + _folder_hash(folder, hashlib.sha1(), b"")  # noqa: S324 - a name, not a security measure


MANIFEST = "iso_bench_manifest.json"
"""The file in a folder iso-bench wrote whole (an export) that lists every other file of it with its SHA-256."""


class ManifestError(IsoBenchError, ValueError):
    """A folder whose files are not those its manifest lists (changed, missing, or added)."""


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path) -> dict[str, str]:
    """List every file under ``folder`` (relative posix path -> SHA-256) in its :data:`MANIFEST`; returns it."""
    folder = Path(folder)
    files = {p.relative_to(folder).as_posix(): file_sha256(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return files


def read_manifest(folder: Path) -> dict[str, str] | None:
    """The files :func:`write_manifest` listed in ``folder``; None when it has no readable manifest."""
    try:
        files = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    ok = isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
    return files if ok else None


def inside(name: str) -> bool:
    """Whether a manifest's entry names a file inside its folder: a relative POSIX path without ``..``, ``.`` or an
    empty part (``../x``, ``/etc/x``, ``a//b`` are not).

    >>> inside("1_Dense/model.safetensors"), inside("../x"), inside("/etc/passwd")
    (True, False, False)
    """
    parts = name.split("/")
    return bool(name) and "\\" not in name and all(p not in ("", ".", "..") for p in parts)


def manifest_differences(folder: Path, files: dict[str, str]) -> dict[str, list[str]]:
    """What in ``folder`` differs from ``files`` (its manifest): ``changed`` (bytes that are not the listed
    SHA-256), ``missing`` (listed, not there), ``linked`` (listed, reached through a symbolic link to a folder:
    not the folder's own file, never read) and ``unexpected`` (there, not listed: files, links, folders that
    hold no listed file), each a sorted list of relative paths."""
    folder = Path(folder)
    listed_dirs = {parent.as_posix() for name in files for parent in Path(name).parents if parent != Path(".")}
    changed, missing, linked, unexpected = [], [], [], []
    for name, digest in sorted(files.items()):
        if not inside(name):  # never followed out of the folder: a listed file that is not in it is missing
            missing.append(name)
            continue
        path = folder / name
        if any((folder / parent).is_symlink() for parent in Path(name).parents if parent != Path(".")):
            linked.append(name)  # a linked subfolder may lead anywhere: its files are not the export's
        elif path.is_symlink() or not path.is_file():
            missing.append(name)
        elif file_sha256(path) != digest:
            changed.append(name)
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel == MANIFEST or (rel in files and path.is_file() and not path.is_symlink()):
            continue
        if path.is_dir() and not path.is_symlink() and rel in listed_dirs:
            continue
        unexpected.append(rel + ("/" if path.is_dir() and not path.is_symlink() else ""))
    return {"changed": changed, "missing": missing, "linked": linked, "unexpected": unexpected}


def verify_manifest(folder: Path) -> list[str]:
    """Check every file :data:`MANIFEST` lists in ``folder`` against its SHA-256; raise :class:`ManifestError`
    naming those changed or missing (and saying what to do). Returns the files there that it does not list."""
    if not Path(folder).is_dir():
        raise ManifestError(f"{folder}: no such folder" if file_kind(Path(folder)) is None else
                            f"{folder}: is {file_kind(Path(folder))}, not a folder; give an exported folder")
    files = read_manifest(folder)
    if files is None:
        raise ManifestError(f"{folder}: no readable {MANIFEST}, so its files cannot be checked (an export of an "
                            "earlier version, or not an iso-bench export): export it again")
    outside = sorted(name for name in files if not inside(name))
    if outside:
        raise ManifestError(f"{folder}: its {MANIFEST} lists files outside the folder ({', '.join(outside[:5])}), "
                            "which are never read: not a manifest iso-bench wrote; do not use the folder, export it "
                            "again")
    found = manifest_differences(folder, files)
    bad = [f"{name} (changed: its SHA-256 is not the recorded one)" for name in found["changed"]]
    bad += [f"{name} (missing)" for name in found["missing"]]
    bad += [f"{name} (reached through a symbolic link to a folder, not the folder's own file)"
            for name in found["linked"]]
    if bad:
        raise ManifestError(f"{folder}: {len(bad)} of its {len(files)} files differ from its {MANIFEST}: "
                            f"{'; '.join(bad[:5])}{'; ...' * (len(bad) > 5)}. The folder was changed after it was "
                            "written: do not use it; export it again")
    return found["unexpected"]


def read_lines(path: Path, error: type[Exception]) -> list[str]:
    """The lines of a UTF-8 file, split on ``\\n`` only: the data holds no-break spaces and other
    characters that ``str.splitlines`` would treat as line breaks. One final newline and a ``\\r``
    before each newline are tolerated. Errors are raised as ``error`` with ``file:line``.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"; _ = p.write_bytes(b"x\\xc2\\xa0y\\r\\nz\\n")
        >>> read_lines(p, ValueError)
        ['x\\xa0y', 'z']
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({exc.reason})") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [s[:-1] if s.endswith("\r") else s for s in lines]


def remove_empty_folders(folder: Path) -> None:
    """Remove ``folder`` and the folders under it when none of them holds a file."""
    if not folder.is_dir() or any(p.is_file() or p.is_symlink() for p in folder.rglob("*")):
        return
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        sub.rmdir()
    folder.rmdir()


def slug(text: str) -> str:
    """A file name for ``text`` (a model id, a revision, a task): every run of other characters than
    letters, digits, ``.``, ``_`` and ``-`` becomes ``__``; a text with characters beyond ASCII gets the first 10
    hex digits of its SHA-256 too, so that distinct names stay distinct (``dup ñ`` and ``dup 模型`` would both
    be ``dup``). An ASCII text's slug is the same as ever: cache namespaces and published folders use it.

    >>> slug("sentence-transformers/all-MiniLM-L6-v2"), slug("/tmp/my model")
    ('sentence-transformers__all-MiniLM-L6-v2', 'tmp__my__model')
    >>> slug("local/dup ñ") != slug("local/dup 模型")
    True
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "__", text).strip("_") or "model"
    return name if text.isascii() else f"{name}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"


DATA_PLACEHOLDER = "DATA"
"""How a recorded command names the data folder (``--data-dir DATA``): a reader passes their own."""


def local_name(path: str | os.PathLike[str]) -> str:
    """How a recorded command names a local file or folder (a model folder, a fit corpus file, an export's
    folder): ``./<its name>``, never the machine's path. Results name such a model by its name and the digest of
    its files, a fit corpus file by its name and SHA-256: a reader runs the command from a folder that holds them.

    >>> local_name("/home/me/models/my model"), local_name("corpus.txt")
    ('./my model', './corpus.txt')
    """
    return f"./{Path(path).expanduser().resolve().name}"


def dataset_record(dataset: Any) -> dict[str, Any]:
    """The data source of an mteb task from its metadata: a local folder (by its name, with the checksum of its
    files; never the machine's path) or the hub."""
    path, revision = str(dataset.get("path", "")), dataset.get("revision")
    folder = Path(path)
    if folder.is_dir():
        name = folder.resolve().name
        return {"repo": name, "revision": revision, "source": "mirror", "path": name,
                "sha256": folder_checksum(folder.resolve())}
    return {"repo": path, "revision": revision, "source": "hub", "path": path, "sha256": None}
