#!/usr/bin/env bash
# The GPU measurements in one go, on a machine with a CUDA GPU and no package registry (under 8 minutes on an H100):
#   here:  bash ../shared/tools/gpu-bundle.sh .gpu      (the wheels, all-MiniLM-L6-v2 and the 7 MTEB STS tasks)
#   there: bash benchmarks/gpu_suite.sh [.gpu]          (from the project root)
# 1. bench_variants.py, all-MiniLM-L6-v2, the 7 MTEB STS tasks, batch 256: plain sentence-transformers encode
#    against iso-bench's encode (sentence vectors, and with token vectors);
# 2. the same at batch 32, then raw alone and raw + every default method, cold and warm;
# 3. gpu_check.py: raw and every default method, batch sizes 32 and 7, cold and warm caches: main scores within 1e-4.
# It ends with every ratio and the check's verdict.
set -uo pipefail
g=${1:-.gpu}
# shellcheck disable=SC1091
source "$g/setup.sh" || { echo "gpu_suite: cannot set up from $g (run gpu-bundle.sh first)"; exit 1; }
export ISO_BENCH_DATA_DIR="$g/data"
log=$(mktemp)
start=$SECONDS
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee -a "$log"
step() {  # step SECONDS LABEL COMMAND...: run one measurement under a time limit, its output kept
  local limit=$1 label=$2
  shift 2
  echo "== $label" | tee -a "$log"
  timeout "$limit" "$@" 2>&1 | grep -v "it/s\]\|s/it\]" | tee -a "$log"
  echo "== $label: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s since the start" | tee -a "$log"
}
step 60 "batch 256: encode floor" python3 benchmarks/bench_variants.py --data-dir "$g/data" --model "$g/minilm" \
  --device cuda --threads 8 --batch-size 256 --encode-only
step 220 "batch 32: encode floor and variants" python3 benchmarks/bench_variants.py --data-dir "$g/data" \
  --model "$g/minilm" --device cuda --threads 8 --batch-size 32
left=$((470 - SECONDS))  # what is left of the 8 minutes, less a margin
step $((left > 60 ? left : 60)) "gpu_check: every default method" python3 benchmarks/gpu_check.py --data-dir "$g/data" \
  --model "$g/minilm"
echo
echo "== summary ($((SECONDS - start)) s)"
grep -E "^== batch|distinct texts|vs sentence-transformers|^ratio|^overhead|largest main-score|GPU tolerance" "$log"
rm -f "$log"
