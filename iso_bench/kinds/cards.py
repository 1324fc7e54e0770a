"""Task cards: what a task is, declared once, as data (no torch, no mteb).

A card names its task, the kind that scores it (a module or package under :mod:`iso_bench.kinds`, or a
dotted module path for a kind defined elsewhere; ``"mteb"`` for one of MTEB's own tasks), where its data
comes from, the splits it scores, its suite, and how the leaderboard groups and labels it. Suites,
``iso-bench list``, the runner and the leaderboard all read the cards; nothing matches on task names.

Cards live in ``tasks/`` (installed as :mod:`iso_bench.tasks`): each module there defines ``CARD`` (one
card) or ``CARDS`` (several). More card packages can be named in ``$ISO_BENCH_TASK_PACKAGES`` (comma
separated module names), so a plugin adds tasks without touching iso-bench.

Example:
    >>> card_of("STSBenchmark").group.key, card_of("WiC").suite
    ('mteb-sts', 'word')
    >>> "Isotropy-STSB" in suites()["isotropy"]
    True
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iso_bench.data.sources import RawSource
from iso_bench.registry import IsoBenchError, Registry, UnknownNameError, did_you_mean

PACKAGES_ENV = "ISO_BENCH_TASK_PACKAGES"
MTEB_KIND = "mteb"


class CardError(IsoBenchError):
    """A task card is malformed, or two cards disagree (the message names the card's module)."""


@dataclass(frozen=True)
class Group:
    """A leaderboard group: one table of ranked tasks (with an optional mean column), or diagnostics.

    ``order`` sorts groups in the leaderboard; ``mean`` names the mean column (empty: no mean);
    ``ranked=False`` marks diagnostics, which are never bold and never averaged.
    """

    key: str
    title: str
    metric: str  # what the main score is, e.g. "cosine Spearman"
    order: int = 100
    mean: str = ""
    ranked: bool = True


def group_of_type(task_type: str | None) -> Group:
    """The group of an MTEB task that has no card (and of the cards of MTEB's other types): one group per mteb task
    type, after the word tasks and before the diagnostics.

    >>> group_of_type("Retrieval").title
    'MTEB Retrieval'
    """
    if not task_type:
        return Group("other", "other tasks", "main score", order=1000)
    return Group(f"mteb-{task_type.lower()}", f"MTEB {task_type}", "main score", order=35)


@dataclass(frozen=True)
class TaskCard:
    """One task, declared as data.

    ``held_out`` is where the held-out setting (``--fit-corpus held-out``) fits on this task: ``"train"`` where
    the dataset has a training split, else a named corpus of :data:`iso_bench.data.provider.NAMED_CORPORA`
    (``"semcor"``); declared, so that it never depends on the route the data took (a mirror may hold fewer
    splits than the hub). ``params`` are the kind's own settings (e.g. which SentEval task a paper-STS card
    reads); ``metadata``
    the fields of mteb's ``TaskMetadata`` that only the card knows (description, reference, type,
    main_score, citation, domains, license, date, annotations). ``size`` is what ``iso-bench list`` says.
    """

    name: str
    kind: str
    suite: str
    group: Group
    label: str = ""
    size: str = ""
    splits: tuple[str, ...] = ("test",)
    source: RawSource | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    held_out: str = "semcor"  # the held-out setting's corpus: "train" (the dataset's training split) or a named one
    metric: str = ""  # the main score's name where the group's metric does not say it (a group of several types)
    module: str = ""  # the module that declared the card (set on registration)

    @property
    def column(self) -> str:
        """The leaderboard's column label."""
        return self.label or self.name

    @property
    def is_mteb(self) -> bool:
        return self.kind == MTEB_KIND

    def kind_module(self) -> str:
        """The module of the card's kind: ``iso_bench.kinds.<kind>``, or ``kind`` when it is a dotted path."""
        return self.kind if "." in self.kind else f"iso_bench.kinds.{self.kind.replace('-', '_')}"


CARDS: Registry[TaskCard] = Registry("task")
_loaded: list[str] = []


def _packages() -> list[str]:
    extra = [p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip()]
    return ["iso_bench.tasks", *extra]


def _register_module(module: Any) -> None:
    cards = list(getattr(module, "CARDS", ())) + ([module.CARD] if hasattr(module, "CARD") else [])
    for card in cards:
        if not isinstance(card, TaskCard):
            raise CardError(f"{module.__name__}: CARD/CARDS must hold TaskCard objects, got {type(card).__name__}")
        card = TaskCard(**{**card.__dict__, "module": module.__name__})
        if card.name in CARDS:
            first = CARDS.get(card.name).module
            raise CardError(f"{module.__name__}: task {card.name!r} is already declared by {first}")
        CARDS.add(card.name, card)


def load_cards() -> Registry[TaskCard]:
    """Import every card module (``iso_bench.tasks`` and ``$ISO_BENCH_TASK_PACKAGES``) once; the registry."""
    for package_name in _packages():
        if package_name in _loaded:
            continue
        try:
            package = importlib.import_module(package_name)
        except ImportError as exc:
            raise CardError(f"task package {package_name!r} (from {PACKAGES_ENV}) cannot be imported: {exc}") from exc
        _loaded.append(package_name)
        modules = [package]
        for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
            if not info.name.startswith("_"):
                modules.append(importlib.import_module(f"{package_name}.{info.name}"))
        for module in modules:
            _register_module(module)
    _check_groups()
    return CARDS


def _check_groups() -> None:
    seen: dict[str, TaskCard] = {}
    for name in CARDS:
        card = CARDS.get(name)
        first = seen.setdefault(card.group.key, card)
        if first.group != card.group:
            raise CardError(f"{card.module}: group {card.group.key!r} of {card.name!r} differs from the one "
                            f"{first.module} declares for {first.name!r}; declare a group once and share it")


def cards() -> list[TaskCard]:
    """Every card, by its group's ``order``, then in declaration order (modules alphabetically)."""
    reg = load_cards()
    return sorted((reg.get(name) for name in reg), key=lambda c: c.group.order)


def held_out_sources() -> dict[str, str]:
    """Each carded task's held-out corpus (``train`` or a named corpus), for a
    :class:`~iso_bench.data.provider.CorpusProvider`.

    >>> held_out_sources()["STSBenchmark"], held_out_sources()["STS12"]
    ('train', 'semcor')
    """
    return {card.name: card.held_out for card in cards()}


def card_of(name: str) -> TaskCard:
    """The card of a task; :class:`UnknownNameError` (with close names) when there is none."""
    return load_cards().get(name)


def find_card(name: str) -> TaskCard | None:
    """The card of a task, or ``None`` (any other MTEB task has none)."""
    reg = load_cards()
    return reg.get(name) if name in reg else None


def suites() -> dict[str, tuple[str, ...]]:
    """Every suite with its tasks, in card order; ``all`` is every carded task.

    >>> suites()["mteb-sts"][:2]
    ('STS12', 'STS13')
    """
    out: dict[str, list[str]] = {}
    for card in cards():
        out.setdefault(card.suite, []).append(card.name)
    out["all"] = [c.name for c in cards()]
    return {k: tuple(v) for k, v in out.items()}


def describe_tasks(default_suite: str = "mteb-sts") -> str:
    """What ``iso-bench list`` says of the tasks: the suites (``default_suite``, what a run without ``--tasks``
    runs, marked), then every task with its kind and size."""
    lines = ["suites (--tasks takes suite, task and mteb benchmark names):"]
    for name, members in suites().items():
        if name != "all":
            lines.append(f"  {name + (' *' if name == default_suite else ''):<12} {' '.join(members)}")
    lines += [f"  {'all':<12} every task above", "  (* = run by default, without --tasks)", "",
              "tasks (kind, size; held-out: what --fit-corpus held-out fits on):"]
    lines += [f"  {card.name:<24} {card.kind:<10} {card.size}; held-out: "
              f"{'its training split' if card.held_out == 'train' else card.held_out}" for card in cards()]
    return "\n".join(lines)


def expand_tasks(names: Iterable[str]) -> list[str]:
    """Replace suite names by their tasks, keep task names, drop repeats (first occurrence wins).

    A name that is neither a suite nor a carded task is passed on as an MTEB task name.
    """
    groups = suites()
    out: list[str] = []
    for name in names:
        out.extend(groups.get(name, (name,)))
    return list(dict.fromkeys(out))


def unknown_task_message(name: str, known: Iterable[str] = ()) -> str:
    """The error for a name that is neither a suite nor a task (``known``: further task names, e.g. mteb's)."""
    names = [*suites(), *known]
    return f"unknown task or suite {name!r}.{did_you_mean(name, names, 0.6)} `iso-bench list` shows them."


__all__ = ["CARDS", "CardError", "Group", "TaskCard", "UnknownNameError", "card_of", "cards", "describe_tasks",
           "expand_tasks",
           "find_card", "group_of_type", "load_cards", "suites", "unknown_task_message"]
