"""Export the winner: a variant fitted as ``iso-bench run`` fits it, written as a sentence-transformers model
folder (:mod:`.build`), with the iso-bench module that applies what sentence-transformers' own ``Dense`` modules
cannot express (:mod:`.module`, imported only where it is used: it loads torch).

Example:
    >>> from iso_bench.export import export                                                    # doctest: +SKIP
    >>> export("sentence-transformers/all-MiniLM-L6-v2+whiten", "task:STSBenchmark", "minilm-whiten")  # doctest: +SKIP
"""

from iso_bench.export.build import ExportError, export, export_variant

__all__ = ["ExportError", "export", "export_variant"]
