#!/usr/bin/env bash
# GPU smoke test: `megaflow train` through a real vLLM server, with disk and then
# broadcast weight sync. Needs a machine with (at least) one NVIDIA GPU, its
# driver, Python 3.11+, network access to PyPI and the Hugging Face hub.
#
#   scripts/gpu-smoke.sh
#
# What it checks, in order (any failure stops it with a non-zero exit and a
# message saying which step failed):
#   1. an NVIDIA GPU is there: `nvidia-smi` exists and lists at least one device.
#      Without one it FAILS (exit 2); it never skips, so a CI job that lands on a
#      machine without a GPU goes red instead of green.
#   2. two venvs under $SMOKE_DIR: one with vLLM (pinned: $VLLM_VERSION) and
#      MegaFlow, for the server and its worker extension; one with MegaFlow's
#      train extra, for the trainer (vLLM pins its own torch).
#   3. a small model: Qwen/Qwen2.5-0.5B-Instruct ($SMOKE_MODEL) from the hub.
#   4. for each weight sync, disk then broadcast:
#      - vLLM serves the model on one GPU in dev mode (VLLM_SERVER_DEV_MODE=1, for
#        /collective_rpc, /reset_prefix_cache, /pause), with MegaFlow's worker
#        extension (megaflow.model.engines.vllm_worker.WeightReceiver) and
#        --logprobs-mode processed_logprobs (logprobs at the sampling temperature);
#        a fresh server per run, so each run starts at weights version 0;
#      - `megaflow train` runs a short config (model type vllm, token-in; the
#        settings-fix task set) with that sync; its start probe checks the
#        server feeds the trainer's prompt ids, every update must reach the
#        server, and the run must exit 0;
#      - the run's weight-sync time and held-out reward are printed.
#   Broadcast uses gloo: the trainer and vLLM share the one GPU, and NCCL does not
#   put two ranks on one device.
#
# Settings (environment): SMOKE_DIR (default .megaflow/gpu-smoke), VLLM_VERSION
# (0.33.0), SMOKE_MODEL (Qwen/Qwen2.5-0.5B-Instruct), SMOKE_PORT (18765),
# SMOKE_STEPS (2), PYTHON (python3).
set -euo pipefail

fail() { echo "gpu-smoke: FAILED: $1" >&2; exit "${2:-1}"; }

# 1. The GPU, before anything is installed or downloaded (shell builtins only).
if ! command -v nvidia-smi >/dev/null 2>&1; then
  fail "no NVIDIA GPU: nvidia-smi is not installed (this smoke test needs one GPU and its driver; it does not skip)" 2
fi
if ! gpus=$(nvidia-smi -L 2>&1); then
  fail "no NVIDIA GPU: nvidia-smi -L failed: ${gpus:-no output}" 2
fi
count=0
while IFS= read -r line; do
  [[ $line == GPU\ [0-9]* ]] && count=$((count + 1))
done <<<"$gpus"
if ((count == 0)); then
  fail "no NVIDIA GPU: nvidia-smi lists no GPU device (${gpus:-no output})" 2
fi
echo "gpu-smoke: $count GPU(s); using GPU 0: $(head -n 1 <<<"$gpus")"

REPO=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
SMOKE_DIR=${SMOKE_DIR:-$REPO/.megaflow/gpu-smoke}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}
SMOKE_MODEL=${SMOKE_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
SMOKE_PORT=${SMOKE_PORT:-18765}
SMOKE_STEPS=${SMOKE_STEPS:-2}
PYTHON=${PYTHON:-python3}
mkdir -p "$SMOKE_DIR"
SMOKE_DIR=$(cd "$SMOKE_DIR" && pwd)
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}

# 2. The venvs.
step() { echo; echo "gpu-smoke: == $* =="; }
step "venvs (vLLM $VLLM_VERSION; MegaFlow from $REPO)"
if [[ ! -x $SMOKE_DIR/vllm-venv/bin/vllm ]]; then
  "$PYTHON" -m venv "$SMOKE_DIR/vllm-venv" || fail "cannot create the vLLM venv"
  "$SMOKE_DIR/vllm-venv/bin/pip" install -q --upgrade pip
  "$SMOKE_DIR/vllm-venv/bin/pip" install -q "vllm==$VLLM_VERSION" || fail "cannot install vllm==$VLLM_VERSION"
fi
"$SMOKE_DIR/vllm-venv/bin/pip" install -q -e "$REPO" || fail "cannot install MegaFlow into the vLLM venv"
if [[ ! -x $SMOKE_DIR/train-venv/bin/megaflow ]]; then
  "$PYTHON" -m venv "$SMOKE_DIR/train-venv" || fail "cannot create the trainer venv"
  "$SMOKE_DIR/train-venv/bin/pip" install -q --upgrade pip
fi
"$SMOKE_DIR/train-venv/bin/pip" install -q -e "$REPO[model,train,agents]" || fail "cannot install MegaFlow's train extra"
bash "$REPO/scripts/install-sysdeps.sh" || fail "system packages (scripts/install-sysdeps.sh)"

# 3. The model.
step "model $SMOKE_MODEL"
MODEL_DIR=$SMOKE_DIR/models/${SMOKE_MODEL##*/}
if [[ ! -f $MODEL_DIR/config.json ]]; then
  "$SMOKE_DIR/vllm-venv/bin/python" -c "
import sys
from huggingface_hub import snapshot_download
snapshot_download(sys.argv[1], local_dir=sys.argv[2])
" "$SMOKE_MODEL" "$MODEL_DIR" || fail "cannot download $SMOKE_MODEL"
fi

# 4. One training run per weight sync, each against a fresh vLLM server.
SERVER_PID=""
stop_server() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT

start_server() {
  local log=$1
  VLLM_SERVER_DEV_MODE=1 "$SMOKE_DIR/vllm-venv/bin/vllm" serve "$MODEL_DIR" \
    --host 127.0.0.1 --port "$SMOKE_PORT" --served-model-name policy \
    --gpu-memory-utilization 0.45 --max-model-len 4096 \
    --logprobs-mode processed_logprobs \
    --worker-extension-cls megaflow.model.engines.vllm_worker.WeightReceiver \
    >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 600); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      tail -n 40 "$log" >&2
      fail "vLLM exited before it was ready (log: $log)"
    fi
    if "$SMOKE_DIR/vllm-venv/bin/python" -c "
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)
" "http://127.0.0.1:$SMOKE_PORT/health" 2>/dev/null; then
      return 0
    fi
    sleep 1
  done
  fail "vLLM did not answer /health within 600 s (log: $log)"
}

write_config() {
  local sync=$1 out=$2 weight_sync
  if [[ $sync == disk ]]; then
    weight_sync="{type: disk, root: $SMOKE_DIR/weights}"
  else
    weight_sync="{type: broadcast, backend: gloo, master_address: 127.0.0.1}"
  fi
  cat >"$out" <<YAML
name: gpu-smoke-$sync
samples: 2
deadline_s: 1800
tasks:
  type: swebench
  path: $REPO/tasks/settings-fix/train.jsonl
agent:
  type: builtin
  max_steps: 3
  max_format_errors: 2
  completion_tokens: 256
  temperature: 1.0
  system_prompt: "Fix the setting with one edit call, then call submit."
model:
  type: vllm
  base_url: http://127.0.0.1:$SMOKE_PORT
  model: policy
  tokenizer: $MODEL_DIR
  max_concurrency: 8
environment:
  runtime:
    type: local
  mode: ephemeral
scheduler:
  policy:
    type: fifo
  max_concurrency: 8
train:
  policy: $MODEL_DIR
  weight_sync: $weight_sync
  held_out:
    path: $REPO/tasks/settings-fix/heldout.jsonl
    limit: 8
  eval_samples: 1
  eval_temperature: 0
  prompts_per_step: 4
  steps: $SMOKE_STEPS
  eval_every: $SMOKE_STEPS
  mode: sync
  lr: 1.0e-6
  temperature: 1.0
  micro_batch: 4
  checkpoint_every: $SMOKE_STEPS
  curve: $SMOKE_DIR/curves/$sync.png
YAML
}

declare -A SUMMARY
for sync in disk broadcast; do
  step "megaflow train with $sync weight sync"
  start_server "$SMOKE_DIR/vllm-$sync.log"
  write_config "$sync" "$SMOKE_DIR/train-$sync.yaml"
  log=$SMOKE_DIR/train-$sync.log
  (cd "$REPO" && "$SMOKE_DIR/train-venv/bin/megaflow" train "$SMOKE_DIR/train-$sync.yaml") 2>&1 | tee "$log" \
    || fail "megaflow train with $sync weight sync exited non-zero (log: $log)"
  stop_server
  synced=$(grep -m1 '^weight sync:' "$log" || true)
  reward=$(grep -m1 '^held-out reward:' "$log" || true)
  [[ -n $synced ]] || fail "the $sync run printed no weight-sync time (log: $log)"
  [[ -n $reward ]] || fail "the $sync run printed no held-out reward (log: $log)"
  SUMMARY[$sync]="$synced; $reward"
done

echo
echo "gpu-smoke: PASSED (vLLM $VLLM_VERSION, $SMOKE_MODEL)"
for sync in disk broadcast; do
  echo "  $sync: ${SUMMARY[$sync]}"
done
