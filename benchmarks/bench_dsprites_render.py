"""Render the procedural dSprites set in chunks and report time, throughput, peak memory and packed size.

    python benchmarks/bench_dsprites_render.py              # all 737,280 images
    python benchmarks/bench_dsprites_render.py --limit 20000
    python benchmarks/bench_dsprites_render.py --materialize  # through DSprites.images (3 GB uint8 + cache file)
    python benchmarks/bench_dsprites_render.py --materialize --train-steps 200  # then train on the full set

Rendering is chunked: only one chunk of uint8 images exists at a time; each chunk is packed to bits
(np.packbits, 512 bytes per image), which is what the cache stores.
"""
from __future__ import annotations
import argparse, resource, sys, time

import numpy as np
import torch

from disentbook.data.dsprites import DSprites


def peak_rss_mb() -> float:
    "Peak resident memory of this process (ru_maxrss is in KiB on Linux, bytes on macOS)."
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 2**10


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="render only the first N images (index order)")
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--materialize", action="store_true", help="use DSprites.images (writes the cache)")
    ap.add_argument("--train-steps", type=int, default=0,
                    help="after materialising, train a beta-VAE (batch 64) on the whole set for N steps")
    a = ap.parse_args(argv)
    if a.threads: torch.set_num_threads(a.threads)
    ds = DSprites("procedural", device=a.device)
    n = len(ds) if a.limit is None else min(a.limit, len(ds))
    rss0 = peak_rss_mb()
    t0 = time.perf_counter()
    if a.materialize:
        images = ds.images; packed_bytes = ds.cache_path().stat().st_size
        assert len(images) == n == len(ds)
    else:
        packed = np.empty((n, 512), dtype=np.uint8)
        for i in range(0, n, a.chunk):
            idx = torch.arange(i, min(i + a.chunk, n), device=ds.device)
            x = ds.sample_observations_from_factors(ds.index_to_factors(idx))
            packed[i:i + len(idx)] = np.packbits(x.flatten(1).cpu().numpy() > 0, axis=1)
        packed_bytes = packed.nbytes
    if a.device != "cpu" and torch.cuda.is_available(): torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    rows = [("images", f"{n:,}"), ("device", a.device), ("threads", str(torch.get_num_threads())),
            ("chunk", str(a.chunk)), ("wall time", f"{wall:.1f} s"), ("images / s", f"{n / wall:,.0f}"),
            ("peak RSS", f"{peak_rss_mb():,.0f} MB (at start {rss0:,.0f} MB)"),
            ("packed size", f"{packed_bytes / 1e6:,.1f} MB" + ("" if n == len(ds) else
                                f" (full set: {len(ds) * 512 / 1e6:,.1f} MB)"))]
    if a.train_steps:
        if not a.materialize: ap.error("--train-steps needs --materialize")
        from disentbook.data.samplers import SingleSampler
        from disentbook.nets import VAE
        from disentbook.training.config import TrainConfig
        from disentbook.training.trainer import Trainer
        from disentbook.objectives.vae import BetaVAE
        tr = Trainer(VAE(), BetaVAE(4.0), SingleSampler(ds, device=a.device),
                     TrainConfig(steps=a.train_steps, batch_size=64, device=a.device, log_every=50, progress=False))
        t1 = time.perf_counter(); tr.fit(); tw = time.perf_counter() - t1
        rows += [("training on the full set", f"{a.train_steps} steps, {a.train_steps * 64 / tw:,.0f} images/s, "
                  f"final loss {tr.history['loss'].iloc[-1]:.1f}"),
                 ("peak RSS after training", f"{peak_rss_mb():,.0f} MB")]
    w = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{w}}  {v}" for k, v in rows))


if __name__ == "__main__":
    main()
