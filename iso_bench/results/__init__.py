"""What a run leaves: result files and their digests (:mod:`.result_files`), the per-instance units of each
evaluation (:mod:`.instances`) and the benchmark definition a result records (:mod:`.benchmark`)."""
