"""Exact against fast random numbers in a vmapped ensemble: images/s of a captured bf16 β-VAE ensemble (the harness's
dSprites sampler and conv64 model, batch 64) with `rng='exact'` (each member's sampler and draws from its own generators,
the numbers of its separate run: K sampler calls and K draws per random tensor, in Python, every step) and `rng='fast'`
(one stream for all members), and the milliseconds per step the inputs take alone. Prints the exact/fast ratio per K,
measured in one run.

    python benchmarks/bench_ensemble_rng.py                    # on a CUDA GPU: K = 8 and 32, writes --out
    python benchmarks/bench_ensemble_rng.py --device cpu --tiny   # anywhere: K = 2, two-step windows (exercises the path)
"""
from __future__ import annotations
import argparse, json, sys, time, types, warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import torch

import bench_gpu as BG
from disentbook.core import cpu_name
from disentbook.training.ensemble import Ensemble


def measure(b, dev, k: int, rng: str, reps: int) -> dict:
    ens = Ensemble(b.trainers("beta_vae", k, "bf16"), capture=dev.type == "cuda", precision="bf16", rng=rng)
    r = b.timed(ens, k, "bf16", "beta_vae", ckpt=False)
    BG.sync(dev); t0 = time.perf_counter()
    for _ in range(reps): ens._inputs()
    BG.sync(dev)
    return dict(k=k, rng=rng, mode=ens.mode, images_per_s=round(r["images_per_s"]),
                steps_per_s=round(r["images_per_s"] / (b.a.batch * k), 1),
                inputs_ms_per_step=round(1000 * (time.perf_counter() - t0) / reps, 3))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="K = 2, windows of 2 steps, one repeat")
    ap.add_argument("--ks", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--out", default=None, help="where the rows go as JSON (default: print only)")
    a = ap.parse_args(argv)
    dev = torch.device(a.device)
    cfg = types.SimpleNamespace(batch=8 if a.tiny else 64, window=2 if a.tiny else 200, warm=1 if a.tiny else 5,
                                repeats=1 if a.tiny else 3, ckpt_every=2000)
    b = BG.Bench(cfg, dev)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # the CPU's eager fallback says so once per ensemble
        for k in ([2] if a.tiny else a.ks):
            got = {rng: measure(b, dev, k, rng, 3 if a.tiny else 50) for rng in ("exact", "fast")}
            rows += got.values()
            print(f"K = {k}: exact {got['exact']['images_per_s']:,} images/s, fast {got['fast']['images_per_s']:,} "
                  f"(exact / fast {got['exact']['images_per_s'] / got['fast']['images_per_s']:.3f}); inputs "
                  f"{got['exact']['inputs_ms_per_step']:.2f} ms against {got['fast']['inputs_ms_per_step']:.2f} ms per step",
                  flush=True)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_name()
    out = dict(device=name, torch=torch.__version__, tiny=bool(a.tiny), batch=cfg.batch, precision="bf16", rows=rows)
    if a.out: Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
