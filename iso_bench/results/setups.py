"""A result's setup is what defines it, never the route its data took; and the data it was computed from is
compared by content.

The setup (mteb's ``experiment_kwargs``, :func:`iso_bench.mteb_plugin.setup_kwargs`) names the fit corpus (a
file by its name, with the first 12 hex digits of its texts' SHA-256 beside it), the fit sample and budget, the
seed, the pooling and the layer. Where the data was read from (a local mirror, the hub) is not part of it:
reads of the same data are one setup. Older iso-bench versions wrote ``data: mirror`` into the setup of a run
that had a data directory, and labelled a file fit corpus ``file_<digest>``; such results keep being found in
their folders (:func:`older_setups`, for the runner's plan) and read as the same setup (:func:`same_setup`, for
the leaderboard). Their files are never moved or rewritten: their digests cover the setup they were written in.

What the data was is recorded with every result (``iso_bench.data``: repository, revision, the splits read and
``rows_sha256``, the SHA-256 of their rows; a mirror copy also ``sha256``, of its files) and compared by
:func:`same_data`: the same repository and revision read with other content is other data, reported, never
merged silently.

>>> same_setup({"data": "mirror", "fit_corpus": "task"}) == same_setup({"fit_corpus": "task"})
True
>>> older_setups({"fit_corpus": "wiki.txt", "fit_corpus_sha256": "329b3d5e3b47"})[-1]
{'fit_corpus': 'file_329b3d5e3b47', 'data': 'mirror'}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROUTE = "data"  # the kwarg older versions recorded the data's route in ("mirror"); never part of a setup now
MIRROR = "mirror"
FILE_DIGEST = "fit_corpus_sha256"  # beside a file fit corpus's name: the first 12 hex digits of its texts' SHA-256
OLD_FILE = "file_"  # how older versions named a file fit corpus: file_<those 12 hex digits>


def older_setups(setup: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The setups older versions wrote for the same ``setup``: with ``data: mirror`` (a run with a data
    directory), a file fit corpus as ``file_<digest>``, and both; the newest first, ``setup`` itself not among
    them."""
    forms = [dict(setup)]
    if setup.get(FILE_DIGEST):
        old = {k: v for k, v in setup.items() if k != FILE_DIGEST}
        old["fit_corpus"] = OLD_FILE + str(setup[FILE_DIGEST])
        forms.append(old)
    out = forms[1:] + [{**form, ROUTE: MIRROR} for form in forms]
    return [form for form in out if form != dict(setup)]


def same_setup(setup: Mapping[str, Any], fit_path: str | None = None) -> dict[str, Any]:
    """``setup`` as this version names it: without the route; a file fit corpus of an older version
    (``file_<digest>``) by its file name (``fit_path``, the path its fit record gives) and digest."""
    out = {k: v for k, v in setup.items() if k != ROUTE}
    corpus = out.get("fit_corpus")
    if isinstance(corpus, str) and corpus.startswith(OLD_FILE) and fit_path:
        out["fit_corpus"], out[FILE_DIGEST] = Path(fit_path).name, corpus[len(OLD_FILE):]
    return out


def content_digest(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, digest)`` of what a data record says the content was: ``("rows", ...)`` where it records the
    SHA-256 of the rows read, else ``("files", ...)`` for a mirror's or a release folder's files; None when it
    records neither (a hub read of an older version)."""
    if record.get("rows_sha256"):
        return "rows", str(record["rows_sha256"])
    return ("files", str(record["sha256"])) if record.get("sha256") else None


def same_data(recorded: Mapping[str, Any], read: Mapping[str, Any]) -> bool | None:
    """Whether two data records are of the same data: False for another repository or revision, or another
    content digest of the same kind (rows, or a folder's files); True for equal digests; None where no digest of
    the same kind is in both (it cannot be told)."""
    if (recorded.get("repo"), recorded.get("revision")) != (read.get("repo"), read.get("revision")):
        return False
    for kind in ("rows_sha256", "sha256"):
        if recorded.get(kind) and read.get(kind):
            return recorded[kind] == read[kind]
    return None


def short(record: Mapping[str, Any]) -> str:
    """A data record in a few words: ``mteb/sts12-sts @ a0d554a64d88, rows sha256 1a2b3c4d5e6f``."""
    digest = content_digest(record)
    what = f", {digest[0]} sha256 {digest[1][:12]}" if digest else ", no digest of its content"
    return f"{record.get('repo', '?')} @ {str(record.get('revision') or '?')[:12]}{what}"


__all__ = ["FILE_DIGEST", "MIRROR", "OLD_FILE", "ROUTE", "content_digest", "older_setups", "same_data",
           "same_setup", "short"]
