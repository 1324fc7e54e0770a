"""The grid of a benchmark: the plan of a run (what is asked, what is missing, what a run reports)."""
