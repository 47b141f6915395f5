"""Session probe: where truncated, full and graph attention spend their time on the GPU."""
import statistics, time, torch, torch.nn.functional as F
import attn_core
from attn_core import graph as G
from torch.profiler import profile, ProfilerActivity
dev, dt = "cuda", torch.bfloat16
def bench(fn, n=30, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts), min(ts)
def fb(f, *xs):
    def run():
        o = f(); o.float().sum().backward()
        for x in xs: x.grad = None
    return run
def prof(run, label, n=5):
    for _ in range(3): run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(n): run()
        torch.cuda.synchronize()
    ev = p.key_averages()
    cuda = sum(e.self_device_time_total for e in ev) / n / 1e3
    print(f"--- {label}: GPU busy {cuda:.2f} ms/step (sum of kernel self times)")
    print(ev.table(sort_by="self_device_time_total", row_limit=8, max_name_column_width=60))
    print(ev.table(sort_by="self_cpu_time_total", row_limit=8, max_name_column_width=60))
torch.manual_seed(0)
# 1. full vs SDPA, interleaved
for L in (1024, 4096):
    q, k, v = (torch.randn(4, 8, L, 64, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    ours, sd = fb(lambda: attn_core.attention(q, k, v), q, k, v), fb(lambda: F.scaled_dot_product_attention(q, k, v), q, k, v)
    r = []
    for _ in range(3):
        a, b = bench(ours, 50), bench(sd, 50); r.append((a[1], b[1]))
    print(f"full L={L}: ours/sdpa best-of {[round(x / y, 3) for x, y in r]} ({r[-1][0]:.3f} vs {r[-1][1]:.3f} ms)")
# 2. truncated
for L, w in ((1024, 128), (16384, 128), (16384, 512)):
    q, k, v = (torch.randn(4, 8, L, 64, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    run = fb(lambda: attn_core.attention(q, k, v, window=w), q, k, v)
    fwd = lambda: attn_core.attention(q, k, v, window=w)
    with torch.no_grad(): f1 = bench(fwd)
    print(f"truncated L={L} w={w}: fwd+bwd {bench(run)} ms, fwd only (no grad) {f1} ms")
    if L == 16384 and w == 512: prof(run, f"truncated L={L} w={w} fwd+bwd")
# 3. graph
N, E, H, D = 200000, 2000000, 4, 16
g = torch.Generator().manual_seed(0)
ei = torch.randint(0, N, (2, E), generator=g).to(dev)
q, k, v = (torch.randn(N, H, D, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
run = fb(lambda: attn_core.graph_attention(q, k, v, ei), q, k, v)
print("graph default", bench(run, 10))
orig_cap, orig_rowdot = G._CUDA_CHUNK_ELEMENTS, G._rowdot
for cap in (1 << 22, 1 << 27):
    G._CUDA_CHUNK_ELEMENTS = cap; print(f"graph cap 2^{cap.bit_length() - 1}", bench(run, 10))
G._CUDA_CHUNK_ELEMENTS = orig_cap
G._rowdot = lambda a, b: torch.einsum("ehd,ehd->eh", a, b); print("graph einsum rowdot", bench(run, 10))
G._rowdot = orig_rowdot
prof(run, "graph fwd+bwd N=200k E=2M", 3)
torch.cuda.reset_peak_memory_stats(); run(); torch.cuda.synchronize()
print("graph peak MiB", torch.cuda.max_memory_allocated() / 2**20)
