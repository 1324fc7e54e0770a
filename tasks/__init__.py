"""iso-bench's task cards, one module per task (or per family of MTEB's own tasks); installed as
``iso_bench.tasks``. Each module defines ``CARD`` (or ``CARDS``): see :mod:`iso_bench.kinds.cards`. Modules whose
name starts with ``_`` hold what cards share (the leaderboard groups) and declare no task.
"""
