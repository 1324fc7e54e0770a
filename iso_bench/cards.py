"""The task cards' schema at the path task packages import (``from iso_bench.cards import TaskCard``); it
lives in :mod:`iso_bench.kinds.cards`. Nothing inside iso-bench imports this module."""

from iso_bench.kinds.cards import (  # noqa: F401 - handed on
    CARDS,
    MTEB_KIND,
    PACKAGES_ENV,
    CardError,
    Group,
    TaskCard,
    UnknownNameError,
    card_of,
    cards,
    expand_tasks,
    find_card,
    group_of_type,
    load_cards,
    suites,
    unknown_task_message,
)
