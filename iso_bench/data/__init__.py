"""Where datasets and fit corpora come from: the hub, a local mirror (:mod:`.sources`, checked by
:mod:`.mirror_check`), a release archive; and the texts a method fits on (:mod:`.fit_corpus`).

The names of :mod:`.sources` are handed on here, so that task cards and plugin task packages keep importing
``iso_bench.data.RawSource``.
"""

from iso_bench.data.mirror_check import DataFormatError
from iso_bench.data.sources import (
    DATA_DIR_ENV,
    DOWNLOAD_ENV,
    DataNotFoundError,
    DataSource,
    RawSource,
    error_chain,
    fetch_archive,
    get_task,
    mirror_dir,
    mirror_load_error,
    not_found_message,
    resolve_source,
    use_source,
)

__all__ = ["DATA_DIR_ENV", "DOWNLOAD_ENV", "DataFormatError", "DataNotFoundError", "DataSource", "RawSource",
           "error_chain", "fetch_archive", "get_task", "mirror_dir", "mirror_load_error", "not_found_message",
           "resolve_source", "use_source"]
