"""Adam/AdamW step time on CUDA: fused vs foreach vs for-loop, for the parameter sets of two real cells."""
import json, os, sys, time
import torch
sys.path.insert(0, os.getcwd())
out = sys.argv[1] if len(sys.argv) > 1 else "opt_probe.json"

def tensors(layers, width, vocab=20000):
    ps = [torch.randn(vocab, width)]
    for _ in range(layers):
        ps += [torch.randn(3 * width, width), torch.randn(3 * width), torch.randn(width, width), torch.randn(width),
               torch.randn(4 * width, width), torch.randn(4 * width), torch.randn(width, 4 * width), torch.randn(width),
               torch.randn(width), torch.randn(width), torch.randn(width), torch.randn(width)]
    return ps

rows = []
for name, (layers, width, vocab) in {"transformer 2x128": (2, 128, 20000), "transformer 4x256": (4, 256, 20000),
                                     "vit 6x128": (6, 128, 64)}.items():
    for impl in ("fused", "foreach", "for-loop"):
        torch.manual_seed(0)
        ps = [p.cuda().requires_grad_() for p in tensors(layers, width, vocab)]
        for p in ps:
            p.grad = torch.randn_like(p)
        kw = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}[impl]
        opt = torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, **kw)
        for _ in range(20):
            opt.step()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter(); a.record()
            for _ in range(100):
                opt.step()
            b.record(); torch.cuda.synchronize()
            times.append((a.elapsed_time(b) / 100, (time.perf_counter() - t0) * 10))
        gpu_ms = sorted(t[0] for t in times)[2]; wall_ms = sorted(t[1] for t in times)[2]
        rows.append({"params": name, "tensors": len(ps), "numel": sum(p.numel() for p in ps), "impl": impl,
                     "step_ms_median": round(gpu_ms, 4), "host_ms_median": round(wall_ms, 4)})
        print(f"{name:20s} {impl:9s} {len(ps):3d} tensors  {gpu_ms:.3f} ms/step (events)  {wall_ms:.3f} ms (host)")
json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, open(out, "w"), indent=1)
