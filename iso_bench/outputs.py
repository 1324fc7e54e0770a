"""Folders written whole (an export, a submission): the target resolved and refused before any work where a
rename cannot put a folder there, a lock per target held from the first check to the swap, the check made again
at the swap, and a rename that never replaces a folder another writer made. Pure standard library.

Two writers of one target (two ``iso-bench export -o cx``, two ``iso-bench submission -o cs``, two ``--overwrite``
of one earlier export) leave one complete output and one clear error: the second finds the lock held and stops
before its work, naming the holder. The lock is an advisory ``fcntl.flock`` on ``.<name>.iso-bench-lock`` beside
the target, removed by its holder when done (a killed holder's lock is released by the kernel). On NFS, ``flock``
is a lock of the server where the mount supports locking (NFSv4, or NFSv3 with ``lockd``): writers on different
machines then take turns as on one machine. Where it does not (a mount with ``-o nolock``, a file system without
locks) each machine only sees its own writers; the check again at the swap and a rename that does not replace an
existing folder (``renameat2``'s ``RENAME_NOREPLACE``, which NFS lacks: there a plain ``rename``, which replaces
only an empty folder) still keep every output whole, and then the last of two racing writers of a new folder
fails with one line, or, in the instant between the check and the rename, replaces the other's folder.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "out"
    >>> with whole_folder(out, "out", lambda: None, ValueError) as folder:
    ...     _ = (folder / "a.txt").write_text("a")
    >>> sorted(p.name for p in out.iterdir())
    ['a.txt']
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from iso_bench.faults import check_space, fault_point
from iso_bench.files import STALE_AFTER, _alive, _writer, host_name, temporary_name

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the check again at the swap still holds
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".iso-bench-lock"
SET_ASIDE = ".old"  # the suffix of an earlier folder set aside while the new one is renamed in
_held: dict[Path, list[int]] = {}  # target: [count, fd] of the locks this process holds (reentrant)


def resolve_output(output: str | os.PathLike[str], error: type[Exception], flag: str = "-o") -> Path:
    """The absolute folder ``output`` names, every symlink and ``..`` resolved (a link to a folder is written
    through, the link kept). Refused with ``error`` before any work: the working folder or one above it (``-o .``,
    ``-o ..``), a mount point and ``/``, which a rename cannot replace and which a whole-folder write would
    otherwise end on with a traceback (``Device or resource busy``)."""
    target = Path(os.path.realpath(Path(output).expanduser()))
    cwd = Path(os.path.realpath(Path.cwd()))
    if target.parent == target or os.path.ismount(target):
        raise error(f"{flag} {output}: {target} is a mount point (the root of a file system), which a rename cannot "
                    "replace: name a new folder inside it")
    if target == cwd or target in cwd.parents:
        where = "the working folder" if target == cwd else "a folder above the working folder"
        raise error(f"{flag} {output}: is {where} ({target}); the output is written under a new name and renamed "
                    "into place, which cannot be done to a folder that holds the working folder: name a new folder "
                    f"beside it (e.g. {flag} {target.parent / ((target.name or 'output') + '-new')})")
    return target


class _Busy(Exception):
    pass


@contextmanager
def output_lock(target: Path, output: str | os.PathLike[str], error: type[Exception]) -> Iterator[None]:
    """Hold the lock of ``target`` (reentrant within a process), or raise ``error`` naming the process that holds
    it. The folder above ``target`` is made when missing (and removed again if left empty). Once taken, an
    earlier folder that a writer killed in its swap left aside is put back (:func:`restore_set_aside`), so the
    checks made under the lock see it."""
    target = Path(target)
    if target in _held:
        _held[target][0] += 1
        try:
            yield
        finally:
            _held[target][0] -= 1
        return
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.parent / f".{target.name}{LOCK_SUFFIX}"
    try:
        fd = _acquire(lock)
    except _Busy as busy:
        _remove_empty(made)
        raise error(f"-o {output}: another iso-bench process ({busy}) is writing {target} now; wait for it "
                    "to end, or choose another folder") from None
    except OSError as exc:
        _remove_empty(made)
        raise error(f"-o {output}: cannot take the lock of {target} ({lock}: {exc.strerror or exc}); nothing was "
                    f"written: free space or fix the permissions of {target.parent}, or choose another "
                    "folder") from None
    _held[target] = [1, fd]
    try:
        restore_set_aside(target)  # an earlier folder a writer killed in its swap left aside: back first
        yield
    finally:
        del _held[target]
        _release(target.parent / f".{target.name}{LOCK_SUFFIX}", fd)
        _remove_empty(made)


def _acquire(path: Path) -> int:
    """The descriptor of ``path`` locked exclusively (made if missing; a file unlinked by the holder that
    released it is opened again), or :class:`_Busy` with the holder's ``pid <n> on <host>``. Where the holder's
    name cannot be written (a full disk) the lock is released and the file removed before the ``OSError``."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise _Busy(holder) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            try:
                check_space(path)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {host_name()}".encode(), 0)
            except OSError:  # a full disk: released and removed, never left held for the process's life
                _release(path, fd)
                raise
            return fd
        os.close(fd)  # removed by the holder before it released it: take the new one


def _release(path: Path, fd: int) -> None:
    with suppress(FileNotFoundError):
        path.unlink()  # while still held: whoever opened it before sees it gone and opens the new one
    os.close(fd)


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # innermost first
        with suppress(OSError):
            folder.rmdir()


@contextmanager
def whole_folder(target: Path, output: str | os.PathLike[str], check: Callable[[], None],
                 error: type[Exception]) -> Iterator[Path]:
    """A new temporary folder beside ``target`` to write into; when the block ends without an error it is put at
    ``target`` whole: under ``target``'s lock (:func:`output_lock`), ``check`` (which raises where ``target``
    may not be written) made again, then a rename that replaces nothing another process made. An earlier folder
    that ``check`` accepts is set aside first (``.<name>@<host>@<pid>-<random>.old``) and removed once the new
    one is in place; one that a killed writer left set aside with nothing at ``target`` is put back when the lock
    is taken (:func:`restore_set_aside`). The folders have the user's usual mode (``0o777`` less the umask), as
    ``mkdir`` makes them."""
    with output_lock(target, output, error):
        check()
        remove_stale_temporary_folders(target.parent, target.name)  # those a killed writer left
        folder = target.parent / f"{temporary_name(target)}{secrets.token_hex(4)}.tmp"
        os.mkdir(folder, 0o777)
        try:
            yield folder
            try:
                check()
            except Exception as exc:
                raise error(f"{exc} (found when the output was complete: another process wrote there meanwhile; "
                            "nothing was replaced)") from None
            _swap(folder, target, output, error)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise


def _swap(folder: Path, target: Path, output: str | os.PathLike[str], error: type[Exception]) -> None:
    """Put ``folder`` at ``target``: absent or empty, or an earlier folder (set aside, removed after)."""
    old = None
    if target.is_dir() and any(target.iterdir()):
        old = target.parent / f"{temporary_name(target)}{secrets.token_hex(4)}{SET_ASIDE}"
        target.rename(old)
        fault_point("swap")
    elif target.is_dir():
        with suppress(OSError):
            target.rmdir()  # an empty folder: a writer that fills it meanwhile keeps it (the rename below fails)
    try:
        rename_no_replace(folder, target)
    except OSError as exc:
        if old is not None:
            old.rename(target)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise error(f"-o {output}: {target} was made by another process while this output was written; "
                        "nothing was replaced: choose a new folder") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def rename_no_replace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, failing with ``EEXIST`` where anything is at ``target`` (Linux's
    ``renameat2`` with ``RENAME_NOREPLACE``); where the system or file system lacks it (NFS), a plain rename,
    which fails on a non-empty folder and replaces an empty one."""
    rename = getattr(_libc(), "renameat2", None)
    if rename is not None:
        at_cwd, no_replace = -100, 1
        if rename(at_cwd, os.fsencode(source), at_cwd, os.fsencode(target), no_replace) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(target))
    os.rename(source, target)


def _libc() -> object:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def restore_set_aside(target: Path, stale_after: float = STALE_AFTER) -> Path | None:
    """Put back at ``target`` the earlier folder that a writer killed in the middle of a swap left set aside
    (``.<name>@<host>@<pid>-<random>.old``, its writer gone as :func:`remove_stale_temporary_folders` judges it)
    where nothing (or an empty folder) is at ``target``: the earlier output is there again, whole, and is never
    taken for a temporary. Where several are left, the newest. Returns the folder put back, or None. Call it
    under ``target``'s lock."""
    target = Path(target)
    if target.is_symlink() or (target.exists() and not (target.is_dir() and not any(target.iterdir()))):
        return None
    left = [p for p in _temporary_folders(target.parent, target.name, stale_after) if p.name.endswith(SET_ASIDE)]
    if not left:
        return None
    newest = max(left, key=lambda p: p.stat().st_mtime)
    with suppress(OSError):
        target.rmdir()
    newest.rename(target)
    return newest


def _temporary_folders(folder: Path, name: str, stale_after: float) -> list[Path]:
    """The temporary folders of ``folder / name`` whose writer is gone."""
    found = []
    here = host_name()
    for tmp in Path(folder).glob(f"{glob.escape('.' + name)}@*@*-*"):
        host, pid = _writer(tmp.name)
        try:
            if not tmp.is_dir() or tmp.is_symlink() or pid is None:
                continue
            stale = not _alive(pid) if host == here else time.time() - tmp.stat().st_mtime > stale_after
            if stale:
                found.append(tmp)
        except FileNotFoundError:  # renamed into place or removed meanwhile by its writer
            pass
    return found


def remove_stale_temporary_folders(folder: Path, name: str, stale_after: float = STALE_AFTER) -> list[Path]:
    """Delete the temporary folders beside ``folder / name`` that a whole-folder write (an export, a submission)
    left when its writer died: directories ``.<name>@<host>@<pid>-*`` (with or without ``.tmp``), judged as
    :func:`iso_bench.files.remove_stale_temporaries` judges files. Only those of ``name``: nothing else in
    ``folder`` is touched; an earlier folder set aside (``.old``) only where something is at ``folder / name``
    (else :func:`restore_set_aside` puts it back). Returns what was deleted."""
    gone = []
    absent = not (Path(folder) / name).exists()
    for tmp in _temporary_folders(Path(folder), name, stale_after):
        if absent and tmp.name.endswith(SET_ASIDE):
            continue
        with suppress(FileNotFoundError):
            shutil.rmtree(tmp)
            gone.append(tmp)
    return gone
