"""Images per second of the procedural 3dShapes renderer (`data.shapes3d`), by batch size, on the CPU (and CUDA if present).

Run: python benchmarks/bench_shapes3d.py [--threads N]"""
import argparse, time

import torch

from disentbook.data.shapes3d import Shapes3D


def rate(data, n: int, repeats: int = 3) -> float:
    "Best-of-`repeats` images per second for batches of `n` random factor indices."
    f = data.sample_factors(n, 0)
    data.sample_observations_from_factors(f[:8])                    # build the geometry table once
    best = float("inf")
    for _ in range(repeats):
        if f.is_cuda: torch.cuda.synchronize()
        t0 = time.perf_counter(); data.sample_observations_from_factors(f)
        if f.is_cuda: torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return n / best


if __name__ == "__main__":
    p = argparse.ArgumentParser(); p.add_argument("--threads", type=int, default=1); a = p.parse_args()
    torch.set_num_threads(a.threads)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        d = Shapes3D(source="procedural", device=dev)
        for n in (64, 1024, 8192) + ((65536,) if dev == "cuda" else ()):
            print(f"{dev:5s} threads={a.threads} batch={n:6d}: {rate(d, n):12,.0f} images/s")
