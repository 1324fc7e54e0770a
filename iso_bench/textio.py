"""Reading the line-oriented dataset files of the public releases (WiC, SentEval STS, ...)."""

from __future__ import annotations

import os
from pathlib import Path


def default_file_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would create (``mkstemp`` uses 0o600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


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
