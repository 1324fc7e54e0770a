"""iso-bench's results in the layout of MTEB's own results repository (github embeddings-benchmark/results):
each variant's result of a task mteb registers, as an *experiment* of its base model.

A run writes a variant under its own model name (``<org>__<model>+<spec>/<revision>/...``), which that
repository refuses: its CI installs mteb without plugins, so ``+spec`` names are unknown models. A submission
writes the same results under the base model, ``<org>__<model>/<revision>/experiments/<name>/<Task>.json``,
``<name>`` being mteb's own serialisation of :func:`submission_kwargs` (the method, its parameters that differ
from their defaults, the fit setting, the seed where there is randomness), beside a ``model_meta.json`` that is
the base model's with those ``experiment_kwargs``. ``raw`` (no parameters, no pooling or layer of its own) is the
base model itself: its results go to ``<org>__<model>/<revision>/`` as the base model's own, with the base
model's ``model_meta.json``. Each result keeps its ``iso_bench`` record; its ``result_sha256`` is checked
against the folder the run wrote and computed again for the folder of the submission
(:func:`iso_bench.results.result_files.identity`), so that it verifies where a reader finds it.

Left out, each kind with one line: iso-bench's own tasks (mteb does not register them), models mteb does not
implement (the repository's CI refuses them), and files other than result JSON (per-instance units, run
settings).

A variant's registered ``ModelMeta`` reads its submitted results back: with iso-bench imported,
``mteb.ResultCache(folder).load_results(models=[meta], load_experiments="match_kwargs")`` matches a variant
both where a run wrote it and where a submission put it (:func:`install_submitted_reader`).

Example:
    >>> made = write_submission("results", "submission")                                  # doctest: +SKIP
    >>> meta = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2+whiten")           # doctest: +SKIP
    >>> submitted_meta(meta).experiment_name                                                # doctest: +SKIP
    'fit_corpus_task__post_processing_whiten'
"""

from __future__ import annotations

import errno
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.faults import check_space
from iso_bench.files import temporary_name
from iso_bench.kinds.cards import cards
from iso_bench.methods import make_method
from iso_bench.outputs import output_lock, resolve_output, whole_folder
from iso_bench.registry import IsoBenchError
from iso_bench.results.result_files import (
    DIGEST,
    META_FILE,
    MODIFIED,
    UNVERIFIED,
    VERIFIED,
    check_entry,
    digest_removed,
    identity,
    meta_text,
    result_digest,
)

METHOD_KEY = "post_processing"  # the experiment kwarg naming the method; its parameters are "<method>.<name>"
NOT_A_SETUP = ("data",)  # the same data from a mirror or the hub is the same setup (DESIGN.md): not in a name
# The suite of the results repository sets no size limit; GitHub refuses files over 100 MB and warns over 50 MB.
# A result file is a few kB, so one over 1 MB is something wrong (a whole corpus in a record): refused.
MAX_FILE_BYTES = 1_000_000
SEPARATOR = "+"  # iso-bench's variant names: "<base>+<method spec>" (iso_bench.mteb_plugin.SEPARATOR)


class SubmissionError(IsoBenchError, ValueError):
    """A results folder that cannot be turned into a submission; the message names the file and why."""


@dataclass
class Submission:
    """What :func:`write_submission` wrote (``files``, under ``out``) and what it left out, and why."""

    out: Path
    files: list[Path] = field(default_factory=list)
    tasks_left_out: set[str] = field(default_factory=set)
    models_left_out: set[str] = field(default_factory=set)

    def notes(self) -> list[str]:
        """One line per kind of thing left out."""
        lines = []
        if self.tasks_left_out:
            lines.append(f"left out {', '.join(sorted(self.tasks_left_out))}: iso-bench's own tasks, which mteb "
                         "does not register (the repository holds results of mteb's tasks only)")
        if self.models_left_out:
            lines.append(f"left out {', '.join(sorted(self.models_left_out))}: models mteb does not implement "
                         "(the repository's CI refuses them)")
        return lines


def submission_kwargs(method_spec: str, setup: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``experiment_kwargs`` of a variant submitted as an experiment of its base model: ``post_processing``
    (the method's name), ``<method>.<parameter>`` for each resolved parameter that differs from its default
    (the seed excepted where the setup holds it), and the setup of the run (:func:`iso_bench.mteb_plugin.
    setup_kwargs`) less where the data came from. Empty for ``raw`` with no setup: the base model itself.
    The same setup always gives the same kwargs (``whiten-256`` and ``whiten(n_components=256)`` alike), and
    different setups different ones.

    >>> submission_kwargs("whiten-256", {"fit_corpus": "task", "data": "mirror"})
    {'post_processing': 'whiten', 'whiten.n_components': 256, 'fit_corpus': 'task'}
    >>> submission_kwargs("flow", {"fit_corpus": "task", "seed": 1}), submission_kwargs("raw", {"data": "mirror"})
    ({'post_processing': 'flow', 'fit_corpus': 'task', 'seed': 1}, {})
    """
    method, _ = make_method(method_spec)
    setup = {k: v for k, v in (setup or {}).items() if k not in NOT_A_SETUP}
    params = {f"{method.name}.{k}": v for k, v in method.get_params().items()
              if v != method.param_defaults()[k] and not (k == "seed" and "seed" in setup)}
    if method.name == "raw" and not params and not setup:
        return {}
    return {METHOD_KEY: method.name, **params, **setup}


def submitted_meta(meta: Any) -> Any:
    """The ``ModelMeta`` a variant is submitted under: its base model's (from mteb's registry), at the variant's
    revision, with :func:`submission_kwargs` as ``experiment_kwargs``. With it, ``mteb.ResultCache(folder)
    .load_results(models=[submitted_meta(meta)], load_experiments="match_kwargs")`` reads exactly that variant's
    submitted results. ``meta``: a variant's ``ModelMeta`` (e.g. ``mteb.get_model_meta("<model>+whiten")``).
    Raises :class:`SubmissionError` when mteb implements no model of the variant's base name."""
    from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import

    base_name, sep, spec = (meta.name or "").rpartition(SEPARATOR)
    if not sep:
        raise SubmissionError(f"{meta.name!r} is not an iso-bench variant (expected '<model>{SEPARATOR}<method>')")
    base = MODEL_REGISTRY.get(base_name)
    if base is None or SEPARATOR in (base.name or ""):
        raise SubmissionError(f"mteb implements no model {base_name!r}: MTEB's results repository accepts results "
                              "of the models mteb implements only")
    kwargs = submission_kwargs(spec, meta.experiment_kwargs)
    return base.model_copy(update={"revision": meta.revision or base.revision, "experiment_kwargs": kwargs or None})


def install_submitted_reader() -> None:
    """Make mteb's ``ResultCache`` find an iso-bench variant's submitted results by the variant's own
    ``ModelMeta``: under ``load_experiments="match_kwargs"`` (mteb's default), a variant's meta also matches the
    folder :func:`submitted_meta` names (its base model, revision and experiment), beside the folder its run
    wrote (``<model>+<spec>``). mteb selects result folders by ``(model name, revision, experiment name)``; the
    wrapper adds the submitted triple of each variant to the ones asked for and changes nothing else. Under
    "match_name" or "no_experiments" the experiment is not part of the match, so the base model's triple would
    bring in other setups' results: there a variant matches its run's folders only. Idempotent."""
    from mteb.cache import ResultCache  # lazily: mteb takes seconds to import
    from mteb.cache.result_cache import LoadExperimentEnum
    from mteb.models.model_meta import ModelMeta

    original = ResultCache.__dict__.get("_filter_paths_by_model_and_revision")
    if original is None:  # an mteb that selects result folders another way: its own reading, unchanged
        return
    select = original.__func__ if isinstance(original, staticmethod) else original
    if getattr(select, "iso_bench_hook", False):
        return

    def by_model_and_revision(paths: Any, models: Any = None, load_experiments: Any = None) -> Any:
        if models and load_experiments is LoadExperimentEnum.MATCH_KWARGS:
            models = list(models)
            if isinstance(models[0], ModelMeta):
                models += [m for m in map(_submitted_or_none, models) if m is not None]
        return select(paths, models=models, load_experiments=load_experiments)

    by_model_and_revision.iso_bench_hook = True  # type: ignore[attr-defined]
    ResultCache._filter_paths_by_model_and_revision = staticmethod(by_model_and_revision)


def _submitted_or_none(meta: Any) -> Any:
    """:func:`submitted_meta` of an iso-bench variant whose base model mteb implements; None for any other."""
    if SEPARATOR not in (meta.name or ""):
        return None
    try:
        return submitted_meta(meta)
    except IsoBenchError:  # not a variant's spec, or a base model mteb does not implement
        return None


def _submittable_tasks() -> set[str]:
    """iso-bench's own tasks (cards of a kind other than mteb): no submission holds them."""
    return {card.name for card in cards() if not card.is_mteb}


def _variant_folders(results: Path) -> list[Path]:
    """Every folder of ``results`` that holds an iso-bench variant's ``model_meta.json``."""
    metas = sorted([*results.glob(f"*/*/{META_FILE}"), *results.glob(f"*/*/experiments/*/{META_FILE}")])
    return [m.parent for m in metas if SEPARATOR in m.parents[1 if m.parent.parent.name != "experiments" else 3].name]


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SubmissionError(f"{path}: not a readable JSON file ({exc})") from exc


def write_submission(results: str | Path, out: str | Path) -> Submission:
    """Write the results of every iso-bench variant under ``results`` (a results folder of ``iso-bench run``,
    or its ``results/`` folder) into ``out`` in the layout of MTEB's results repository (see the module's
    docstring); ``out`` must not exist or be empty. Returns what was written and left out. Raises
    :class:`SubmissionError` on a result whose digest does not match (changed since its run), one with no
    iso-bench record, two results that would share a file, or a file over :data:`MAX_FILE_BYTES`."""
    given = Path(out)
    results, out = Path(results), _check_out(given)
    with output_lock(out, given, SubmissionError):  # held from this check to the swap
        _check_out(given)  # again, now that no other iso-bench writes it
        return _submit(results, out, given)


def _submit(results: Path, out: Path, given: Path) -> Submission:
    """:func:`write_submission`'s work, under ``out``'s lock."""
    from mteb.models.model_meta import ModelMeta  # lazily: mteb takes seconds to import

    if (results / "results").is_dir():
        results = results / "results"
    if not results.is_dir():
        raise SubmissionError(f"{results}: no such results folder")
    own_tasks, made = _submittable_tasks(), Submission(out)
    pending: dict[Path, tuple[str, Path]] = {}
    for folder in _variant_folders(results):
        raw_meta = _read(folder / META_FILE)
        meta = ModelMeta.model_construct(**{k: raw_meta.get(k) for k in ("name", "revision", "experiment_kwargs")})
        try:
            target_meta = submitted_meta(meta)
        except SubmissionError:
            made.models_left_out.add(meta.name.rpartition(SEPARATOR)[0])
            continue
        revision = folder.parent.parent.name if folder.parent.name == "experiments" else folder.name
        old_setup = raw_meta.get("experiment_kwargs") or {}
        new_name, new_setup = target_meta.name, dict(target_meta.experiment_kwargs or {})
        target = out / target_meta.model_name_as_path() / target_meta.revision
        if target_meta.experiment_name:
            target = target / "experiments" / target_meta.experiment_name
        _add(pending, target / META_FILE, meta_text(target_meta), folder)
        if target_meta.experiment_name:  # the base model's own meta at the revision level
            base = target_meta.model_copy(update={"experiment_kwargs": None})
            _add(pending, target.parents[1] / META_FILE, meta_text(base), folder)
        for path in sorted(folder.glob("*.json")):
            if path.name == META_FILE:
                continue
            data = _read(path)
            task = data.get("task_name", path.stem)
            if task in own_tasks:
                made.tasks_left_out.add(task)
                continue
            old = identity(meta.name, revision, old_setup, task)
            new = identity(new_name, target_meta.revision, new_setup, task)
            for entries in data.get("scores", {}).values():
                for entry in entries:
                    _resign(entry, old, new, path)
            _add(pending, target / path.name, json.dumps(data, indent=2, ensure_ascii=False), path)
    if not pending:
        raise SubmissionError(f"{results}: holds no iso-bench result of a task and model mteb registers")
    for _path, (text, source) in sorted(pending.items()):
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise SubmissionError(f"{source}: {len(text.encode('utf-8'))} bytes as submitted, over the "
                                  f"{MAX_FILE_BYTES} a submitted file may have")
    _write_whole(out, given, pending, made)
    return made


def _check_out(out: Path) -> Path:
    """The folder a submission is written to, checked before any work: absent or empty (a symlink followed to the
    folder it points to, the link kept), in a folder that can be written; not the working folder, one above it or
    a mount point (:func:`iso_bench.outputs.resolve_output`)."""
    target = resolve_output(out, SubmissionError)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise SubmissionError(f"-o {out}: exists and is not an empty folder; name a new one")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        if not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        Path(tempfile.mkdtemp(dir=parent, prefix=temporary_name(target))).rmdir()
    except OSError as exc:
        raise SubmissionError(f"-o {out}: cannot write in {parent} ({exc.strerror or exc}); give a folder you can "
                              "write to") from None
    return target


def _write_whole(out: Path, given: Path, pending: dict[Path, tuple[str, Path]], made: Submission) -> None:
    """Write every pending file (paths under ``out``) into a temporary folder beside ``out`` and rename it into
    place (:func:`iso_bench.outputs.whole_folder`): the submission is there whole or not at all (a full disk
    leaves nothing, and the same command then works; a second submission to the same folder at once is one
    error line)."""
    try:
        with whole_folder(out, given, lambda: _check_out(given), SubmissionError) as folder:
            for path, (text, _) in sorted(pending.items()):
                inside = folder / path.relative_to(out)
                inside.parent.mkdir(parents=True, exist_ok=True)
                check_space(inside)  # tests: a full disk (ISO_BENCH_FULL_DISK)
                inside.write_text(text, encoding="utf-8")
    except OSError as exc:
        if isinstance(exc, IsoBenchError):
            raise
        raise OSError(exc.errno, exc.strerror, str(out)) from None  # said for the folder asked for
    made.files.extend(sorted(pending))


def _add(pending: dict[Path, tuple[str, Path]], target: Path, text: str, source: Path) -> None:
    """Add one file to write; two different texts for one file (the same setup read from two folders of the
    run) are refused, naming both."""
    if target in pending and pending[target][0] != text:
        raise SubmissionError(f"{source} and {pending[target][1]} are the same setup ({target.parent.name}): "
                              "move one of them out of the results folder")
    pending.setdefault(target, (text, source))


def _resign(entry: dict[str, Any], old: Mapping[str, Any], new: Mapping[str, Any], path: Path) -> None:
    """Check a score entry's digest against the folder the run wrote (``old``) and compute it again for the
    folder of the submission (``new``); an entry with only iso-bench 0.1's scores digest keeps it."""
    status = check_entry(entry, old)
    if status == MODIFIED and digest_removed(entry.get("iso_bench") or {}):
        raise SubmissionError(f"{path}: a score's digest (iso_bench.{DIGEST}) was removed from a record of a "
                              "version that writes one, so the result was changed after its run (modified); run it "
                              "again rather than submit it")
    if status == MODIFIED:
        raise SubmissionError(f"{path}: a score's digest does not match: the file, its model name or setup was "
                              "changed after its run; run it again rather than submit it")
    if status == UNVERIFIED:
        raise SubmissionError(f"{path}: a score with no iso-bench record; only results iso-bench wrote are "
                              "submitted")
    if status == VERIFIED:
        entry["iso_bench"][DIGEST] = result_digest(entry, new)
