#!/usr/bin/env bash
# attnbench's own GPU calls: bash .gpu/mine.sh PHASES  (tests,probe,probe2,bench,rec,train,alone,packed,custom)
set +e
export PYTHONUNBUFFERED=1
PHASES=",${1:-tests,probe,bench},"
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
T0=$(date +%s); R=$PWD; G=$R/.gpu; D=$G/data; W=$OUT/w; mkdir -p "$W"
has(){ [[ $PHASES == *",$1,"* ]]; }
log(){ echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$W/timeline.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$G"/whl/*.whl > "$W/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$R PATH=/tmp/site/bin:$PATH
python3 -m pip install -q --no-deps --no-build-isolation --no-cache-dir -e . >> "$W/pip.log" 2>&1; log "install rc=$?"
nvidia-smi > "$W/nvidia-smi.txt" 2>&1; git rev-parse HEAD > "$W/commit.txt" 2>/dev/null; git status --short >> "$W/commit.txt" 2>/dev/null
python3 -c "import torch,lightning,torch_geometric as g;print('torch',torch.__version__,'cuda',torch.version.cuda,'lightning',lightning.__version__,'pyg',g.__version__,torch.cuda.get_device_name(0))" | tee "$W/versions.txt"
AB="python3 -m benchmarks"
pids=()
if has probe; then TORCH_LOGS=recompiles timeout -k 10 ${PROBE_T:-220} python3 "$G/flex_probe.py" cuda > "$W/flex.log" 2>&1 & pids+=($!); fi
if has tests; then
  timeout -k 10 ${TESTS_T:-260} python3 -m pytest -q -n ${NW:-8} -p no:cacheprovider -o addopts="" -rfEs -m gpu --continue-on-collection-errors \
    ${TESTS:-tests/attn_core tests/tasks tests/benchmarks/cli/test_cli_hostile.py tests/benchmarks/run/test_budgets.py} > "$W/pytest_gpu.log" 2>&1; log "tests rc=$?"
fi
for p in "${pids[@]}"; do wait "$p"; log "pid $p rc=$?"; done
if has probe2; then timeout -k 10 ${PROBE2_T:-80} python3 "$G/probe2.py" > "$W/probe2.log" 2>&1; log "probe2 rc=$?"; fi
if has bench; then
  timeout -k 10 ${BENCH_T:-170} $AB bench attention --config "$G/bench_mine.yaml" --out "$W/bench" ${BENCH_SET} > "$W/bench.log" 2>&1; log "bench rc=$?"
fi
if has rec; then
  timeout -k 10 ${REC_T:-120} $AB bench recurrence --config "$G/bench_rec.yaml" --out "$W/rec" ${REC_SET} > "$W/rec.log" 2>&1; log "rec rc=$?"
fi
if has train; then
  timeout -k 10 ${TRAIN_T:-240} $AB bench train --device cuda --out "$W/train" ${TRAIN_SET} > "$W/train.log" 2>&1; log "train rc=$?"
fi
if has alone; then
  timeout -k 10 ${ALONE_T:-150} $AB run "$G/one.yaml" --data-dir "$D" --out "$W/alone" --cache-dir /tmp/cache --launcher inline > "$W/alone.log" 2>&1; log "alone rc=$?"
fi
if has packed; then
  timeout -k 10 120 $AB run "$G/packed.yaml" --data-dir "$D" --out "$W/packed" --cache-dir /tmp/cache \
    --jobs 4 --gpus 0 --cells-per-gpu 4 > "$W/packed.log" 2>&1; log "packed rc=$?"
fi
if has custom; then (eval "$CMD") > "$W/custom.log" 2>&1; log "custom rc=$?"; fi
for f in pytest_gpu flex probe2 bench rec train alone packed custom; do
  [ -f "$W/$f.log" ] && { echo "=== $f"; grep -v '__recompiles\]\|USDT\|^\[.*\] \(seq\|graph\|var\|band\|enc\)' "$W/$f.log" | tail -${TAILN:-30}; }
done
cat "$W/timeline.txt"
cd "$OUT" && tar czf gpu.tar.gz w && rm -rf w
