#!/usr/bin/env bash
# The whole train quickstart on several seeds, each as `make run` runs seed 0: the
# policy built and warm-started with --seed N (kept under .megaflow/models/ by a hash of
# everything it is built from, and reused while that holds), the trained arm and its shuffled-reward control with train.seed N, and
# `megaflow train compare`; then one table of every seed
# (benchmarks/study_settings_kinds.py seeds, written to benchmarks/studies/quickstart_seeds.md).
#
#   scripts/quickstart-seeds.sh [N ...]        # default: 0 1 2
#   OUT=dir scripts/quickstart-seeds.sh 3      # where the arms write (.megaflow/train/seeds)
#
# Seeds run one after another (each takes about 8 minutes on a quiet 2-core machine).
# Exits 1 if any seed's compare does, after the table.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
MF=.venv/bin/megaflow
OUT=${OUT:-.megaflow/train/seeds}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ $# -gt 0 ] || set -- 0 1 2
status=0
dirs=()
for n in "$@"; do
  key=$($PY -c "import sys; from pathlib import Path
from megaflow.app.training.quickstart import SFT_STEPS, policy_key
print(policy_key(Path('tasks/settings-kinds'), sft_steps=SFT_STEPS, seed=int(sys.argv[1])))" "$n")
  model=.megaflow/models/settings-kinds-s$n-$key
  dir=$OUT/s$n
  rm -rf "$dir"
  mkdir -p "$dir"
  dirs+=("$dir")
  note() { echo "$1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)${2:+ rc $2}" >> "$dir/load.txt"; }
  if [ ! -f "$model/config.json" ]; then
    note "build start"
    $PY -m megaflow.app.training.quickstart "$model" --seed "$n" | tee "$dir/build.log"
    note "build end"
  fi
  # the quickstart's config with this seed's policy and train.seed
  $PY - "$model" "$n" "$dir/config.yaml" <<'PY'
import sys

import yaml

model, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cfg = yaml.safe_load(open("examples/train-quickstart.yaml"))
cfg["model"]["model"] = model
cfg["train"]["seed"] = seed
with open(out, "w") as f:
    yaml.safe_dump(cfg, f, sort_keys=False)
PY
  note "trained start"
  rc=0; $MF train "$dir/config.yaml" --curve "$dir/trained.png" | tee "$dir/trained.log" || rc=$?
  note "trained end" "$rc"
  note "control start"
  rc=0; $MF train "$dir/config.yaml" --control shuffled --no-eval-before \
    --curve "$dir/control.png" | tee "$dir/control.log" || rc=$?
  note "control end" "$rc"
  $MF train compare "$dir/trained.json" "$dir/control.json" | tee "$dir/compare.log" || status=1
done
$PY benchmarks/study_settings_kinds.py seeds "${dirs[@]}" --out benchmarks/studies/quickstart_seeds.md
exit $status
