"""Where bf16 helps on a CPU: each convolution of the conv64 VAE (encoder and decoder, batch 64), forward + backward,
in fp32 and bf16 autocast, each with the default and the channels-last layout; milliseconds per call (median of
interleaved repeats) and the speed-up of each setting over fp32 with the default layout, measured in one run.

    python3 benchmarks/bench_conv_layers.py [--repeats 5] [--calls 20]
"""
import argparse, statistics, time

import torch
from torch import nn

LAYERS = [("encoder conv 1->32, 64x64", nn.Conv2d(1, 32, 4, 2, 1), (64, 1, 64, 64)),
          ("encoder conv 32->32, 32x32", nn.Conv2d(32, 32, 4, 2, 1), (64, 32, 32, 32)),
          ("encoder conv 32->64, 16x16", nn.Conv2d(32, 64, 4, 2, 1), (64, 32, 16, 16)),
          ("encoder conv 64->64, 8x8", nn.Conv2d(64, 64, 4, 2, 1), (64, 64, 8, 8)),
          ("decoder convT 64->64, 4x4", nn.ConvTranspose2d(64, 64, 4, 2, 1), (64, 64, 4, 4)),
          ("decoder convT 64->32, 8x8", nn.ConvTranspose2d(64, 32, 4, 2, 1), (64, 64, 8, 8)),
          ("decoder convT 32->32, 16x16", nn.ConvTranspose2d(32, 32, 4, 2, 1), (64, 32, 16, 16)),
          ("decoder convT 32->1, 32x32", nn.ConvTranspose2d(32, 1, 4, 2, 1), (64, 32, 32, 32))]
SETTINGS = {"fp32": (False, False), "fp32 channels-last": (False, True), "bf16": (True, False),
            "bf16 channels-last": (True, True)}


def ms_per_call(layer, x, bf16, cl, calls):
    if cl: layer = layer.to(memory_format=torch.channels_last); x = x.contiguous(memory_format=torch.channels_last)
    x = x.detach().requires_grad_(True)
    def f():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16): y = layer(x)
        y.float().sum().backward()
    for _ in range(3): f()
    t = time.perf_counter()
    for _ in range(calls): f()
    return (time.perf_counter() - t) / calls * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5); p.add_argument("--calls", type=int, default=20)
    a = p.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; ms per forward + backward (median of {a.repeats})")
    print(f"{'layer':32s} " + " ".join(f"{k:>20s}" for k in SETTINGS))
    for name, layer, shape in LAYERS:
        x = torch.randn(shape)
        t = {k: [] for k in SETTINGS}
        for _ in range(a.repeats):                       # interleaved: every setting sees the same machine state
            for k, (bf, cl) in SETTINGS.items(): t[k].append(ms_per_call(layer, x, bf, cl, a.calls))
        med = {k: statistics.median(v) for k, v in t.items()}
        print(f"{name:32s} " + " ".join(f"{med[k]:7.2f} ({med['fp32'] / med[k]:4.2f}x)".rjust(20) for k in SETTINGS))


if __name__ == "__main__":
    main()
