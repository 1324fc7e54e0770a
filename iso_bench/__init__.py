"""iso-bench: which isotropy post-processing makes an encoder's embeddings better, on which tasks, and
by how much, measured with the MTEB harness.

Importing the package is cheap: torch, transformers and mteb load only when used. Once mteb's model
registry is imported, every variant of the known models is registered with it, so that
``mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten")`` works after ``import iso_bench``.
"""

from __future__ import annotations

from iso_bench import _hooks
from iso_bench._version import __version__

_hooks.install()

__all__ = ["__version__"]
