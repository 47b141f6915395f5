#!/usr/bin/env bash
# Session O (2026-11-30), issue 46's missing GPU figures, one call:  bash .gpu/s.sh
# Phases in order, each under its own timeout and the call's deadline (DL seconds after start):
#   graphs  graphs_gpu --set seeds=1, one cell at a time: the plan (--dry-run) first, then the run,
#           then costs.json from its records and the plan of the full config from them
#   train   bench train, POS transformer and ViT: default (fused AdamW) vs trainer.compile=reduce-overhead
#   opt     AdamW step time: fused vs foreach vs for-loop
#   bench   bench attention: graph N=200k vs TransformerConv, truncated w=128/512 at 16k and 32k, 32k variants
#   pack    POS transformer cells packed K=1,2,4,8 per GPU (MPS when the image has it; K=8 without it too)
set +e
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
T0=$(date +%s); R=$PWD; G=$R/.gpu; D=$G/data; W=$OUT/w; mkdir -p "$W"; DL=${DL:-540}
log(){ echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$W/timeline.txt"; }
left(){ echo $(( DL - ($(date +%s) - T0) )); }
# t WANT: the timeout for a phase that wants WANT s, capped by what is left (0: skip)
t(){ local l; l=$(( $(left) - 5 )); [ "$l" -lt "${2:-20}" ] && { echo 0; return; }; [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$G"/whl/*.whl > "$W/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$R PATH=/tmp/site/bin:$PATH
python3 -m pip install -q --no-deps --no-build-isolation --no-cache-dir -e . >> "$W/pip.log" 2>&1; log "install rc=$?"
nvidia-smi > "$W/nvidia-smi.txt" 2>&1; git rev-parse HEAD > "$W/commit.txt" 2>/dev/null; git status --short | head >> "$W/commit.txt"
python3 -c "import torch,lightning,torch_geometric as g;print('torch',torch.__version__,'cuda',torch.version.cuda,'lightning',lightning.__version__,'pyg',g.__version__,torch.cuda.get_device_name(0))" | tee "$W/versions.txt"
MPS=$(command -v nvidia-cuda-mps-control); log "nvidia-cuda-mps-control: ${MPS:-absent}"; nproc >> "$W/versions.txt"
AB="python3 -m benchmarks"
# --- graphs
$AB run graphs_gpu --data-dir "$D" --out "$W/graphs_gpu" --cache-dir /tmp/cache --set seeds=1 --jobs 1 --dry-run > "$W/graphs_plan.log" 2>&1
T=$(t 150); log "graphs_gpu (timeout $T)"
[ "$T" -gt 0 ] && timeout -k 10 "$T" $AB run graphs_gpu --data-dir "$D" --out "$W/graphs_gpu" --cache-dir /tmp/cache --set seeds=1 --jobs 1 > "$W/graphs_gpu.log" 2>&1
log "graphs_gpu rc=$?"
python3 -m benchmarks.run.plan write "$W/graphs_gpu" > "$W/costs_write.log" 2>&1 && cp results/reference/*/costs.json "$W/" 2>/dev/null
$AB run graphs_gpu --data-dir "$D" --out /tmp/graphs_full --dry-run > "$W/graphs_full_plan.log" 2>&1
# --- train
TS=(--set isolate=false --set rounds=3 --set warmup=5 --set repeats=30 --set 'models={"pos_tagging":["transformer"],"vision":["vit"]}')
T=$(t 80); log "train default (timeout $T)"
[ "$T" -gt 0 ] && timeout -k 10 "$T" $AB bench train --device cuda --out "$W/train_default" "${TS[@]}" > "$W/train_default.log" 2>&1; log "train default rc=$?"
T=$(t 130); log "train reduce-overhead (timeout $T)"
[ "$T" -gt 0 ] && timeout -k 10 "$T" $AB bench train --device cuda --out "$W/train_ro" "${TS[@]}" --set 'suite_set=[trainer.compile=reduce-overhead]' > "$W/train_ro.log" 2>&1; log "train ro rc=$?"
# --- optimizer
T=$(t 40); [ "$T" -gt 0 ] && timeout -k 5 "$T" python3 "$G/opt_probe.py" "$W/opt_probe.json" > "$W/opt.log" 2>&1; log "opt rc=$?"
# --- kernels
T=$(t 110); log "bench (timeout $T)"
[ "$T" -gt 0 ] && timeout -k 10 "$T" $AB bench attention --config "$G/bench_s.yaml" --out "$W/bench" > "$W/bench.log" 2>&1; log "bench rc=$?"
# --- packing
for K in 1 2 4 8; do
  T=$(t 60 35); [ "$T" -gt 0 ] || break; log "pack K=$K (timeout $T)"
  timeout -k 10 "$T" $AB run "$G/pack.yaml" --data-dir "$D" --out "$W/pack$K" --cache-dir /tmp/cache --set seeds=$K \
    --jobs $K --gpus 0 --cells-per-gpu $K > "$W/pack$K.log" 2>&1; log "pack K=$K rc=$?"
done
if [ -n "$MPS" ]; then
  T=$(t 60 35); if [ "$T" -gt 0 ]; then
    mkdir -p /tmp/nomps; for b in python3 nvidia-smi git; do ln -sf "$(command -v $b)" /tmp/nomps/; done
    log "pack K=8 without MPS (timeout $T)"
    PATH=$(echo "$PATH" | tr : "\n" | grep -vxF "$(dirname "$MPS")" | paste -sd:):/tmp/nomps timeout -k 10 "$T" $AB run "$G/pack.yaml" --data-dir "$D" --out "$W/pack8_nomps" \
      --cache-dir /tmp/cache --set seeds=8 --jobs 8 --gpus 0 --cells-per-gpu 8 > "$W/pack8_nomps.log" 2>&1; log "pack8 nomps rc=$?"
  fi
fi
for f in graphs_plan graphs_gpu graphs_full_plan train_default train_ro opt bench pack1 pack2 pack4 pack8 pack8_nomps; do
  [ -f "$W/$f.log" ] && { echo "=== $f"; grep -v '__recompiles\]\|USDT' "$W/$f.log" | tail -${TAILN:-14}; }
done
cat "$W/timeline.txt"
cd "$OUT" && tar czf gpu.tar.gz w && rm -rf w
