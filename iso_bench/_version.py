"""iso-bench's version, as installed (shared ground: any module may read it)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("iso-bench")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
