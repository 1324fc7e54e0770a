"""``iso-bench submission``: a results folder turned into the layout of MTEB's own results repository
(:func:`iso_bench.results.submission.write_submission`), ready for a pull request there.

Example:
    >>> main(["submission", "results", "-o", "submission"])                           # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import sys

from iso_bench.files import written_to


def add_submission(sub: argparse._SubParsersAction) -> None:
    """The ``submission`` sub-command's parser."""
    sub_ = sub.add_parser(
        "submission", help="the results in the layout of MTEB's results repository, for a pull request there",
        description="Each variant's results of mteb's tasks as experiments of its base model "
        "(<org>__<model>/<revision>/experiments/<name>/, <name> from post_processing, the changed parameters and "
        "the setup; the base model's model_meta.json beside them), raw as the base model's own results; "
        "iso-bench's own tasks (WiC, WSD-ALL, Isotropy-STSB, *-SentEval) and files other than result JSON left out.")
    sub_.set_defaults(func=cmd_submission, network=False)
    sub_.add_argument("results_dir", metavar="RESULTS",
                      help="results folder of `iso-bench run` (or its results/ folder)")
    sub_.add_argument("-o", "--output", metavar="OUT", required=True,
                      help="a new or empty folder; copy its model folders into the repository's results/")


def cmd_submission(args: argparse.Namespace) -> int:
    """Write the submission and say what it holds and what it left out."""
    from iso_bench.results.submission import write_submission  # lazily: it imports mteb when it runs

    made = write_submission(args.results_dir, args.output)
    models = sorted({p.relative_to(made.out).parts[0] for p in made.files})
    print(f"wrote {len(made.files)} files for {', '.join(models)} to {written_to(made.out)}", file=sys.stderr)
    for line in made.notes():
        print(line, file=sys.stderr)
    return 0
