"""Numerical code, numpy only (torch lazily, for the GPU products of :mod:`.linalg`): linear algebra, the
statistics of intervals and paired tests (:mod:`.stats`, :mod:`.batch_scores`), isotropy measures
(:mod:`.isotropy`) and outlier dimensions (:mod:`.outliers`)."""
