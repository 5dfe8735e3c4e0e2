"""Cost of the exact-OT loss (Eq. 9, `contrastive.w2_loss`) against a whole `contrastive_w2` training step.

    python benchmarks/bench_ot_loss.py [--batches 128 512] [--steps 10] [--repeats 3] [--device cpu|cuda] [--hidden 256]

For each batch size B: the median time of (a) the OT loss alone — cost matrix on the device, plan from POT's network
simplex (`emd`) or the Hungarian solver on the CPU, forward and backward through the fixed plan — on latent codes of
the model's size (d_z = 16), and (b) a full `Trainer` step of `contrastive_w2` (Eq. 8: two encoders and one decoder on
B target + B background 28x28 images, Danskin gradients, Adam) and of `contrastive_w2_dirac` (Eq. 7, the same step
without the OT loss). Prints the share of the step spent in the OT loss, measured two ways: (a) / step(Eq. 8) and
(step(Eq. 8) - step(Eq. 7)) / step(Eq. 8). Target: <= 20 % at B = 128.
"""
import argparse, statistics, time

import torch

from disentbook.objectives.contrastive import ContrastiveVAE, w2_loss
from disentbook.core import default_device, make_generator
from disentbook.data.base import LabelledImages
from disentbook.data.samplers import TargetBackgroundSampler
from disentbook.training.trainer import Trainer
from disentbook.objectives.base import make_objective


def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize()


def time_ot(b, dev, solver, steps, d=16):
    g = make_generator(0, dev)
    zx = torch.randn(b, d, device=dev, generator=g).requires_grad_(True); zy = torch.randn(b, d, device=dev, generator=g) + 0.3
    w2_loss(zx, zy, solver).backward(); sync(dev)
    t = time.perf_counter()
    for _ in range(steps): w2_loss(zx, zy, solver).backward()
    sync(dev)
    return (time.perf_counter() - t) / steps


def time_step(objective, b, dev, steps, hidden, **kw):
    g = make_generator(0)
    n = max(4 * b, 1024)
    tx = (torch.rand(n, 1, 28, 28, generator=g) * 255).to(torch.uint8)
    s = TargetBackgroundSampler(LabelledImages(tx, torch.arange(n) % 10, [str(i) for i in range(10)], "bench"),
                                LabelledImages(tx.flip(0) // 2, torch.zeros(n, dtype=torch.long), ["bg"], "bench"), device=dev)
    tr = Trainer(ContrastiveVAE(hidden=hidden), make_objective(objective, **kw), s,
                 dict(steps=10 ** 6, batch_size=b, lr=1e-3, device=str(dev), progress=False, log_every=steps, amp=False))
    tr.fit(2); sync(dev)
    t = time.perf_counter(); tr.fit(steps); sync(dev)
    return (time.perf_counter() - t) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    dev = default_device(a.device)
    print(f"device {dev}, torch threads {torch.get_num_threads()}, hidden {a.hidden}, {a.steps} steps x {a.repeats} repeats (medians)")
    for b in a.batches:
        r = {k: [] for k in ("emd", "hungarian", "eq8", "eq8_hungarian", "eq7")}
        for _ in range(a.repeats):                                             # interleaved repeats
            r["emd"].append(time_ot(b, dev, "emd", a.steps)); r["hungarian"].append(time_ot(b, dev, "hungarian", a.steps))
            r["eq8"].append(time_step("contrastive_w2", b, dev, a.steps, a.hidden, monitor_w2=False))
            r["eq8_hungarian"].append(time_step("contrastive_w2", b, dev, a.steps, a.hidden, solver="hungarian", monitor_w2=False))
            r["eq7"].append(time_step("contrastive_w2_dirac", b, dev, a.steps, a.hidden, monitor_w2=False))
        m = {k: statistics.median(v) * 1e3 for k, v in r.items()}
        print(f"B = {b}: OT loss fwd+bwd emd {m['emd']:.2f} ms, hungarian {m['hungarian']:.2f} ms; step Eq. 8 (emd) "
              f"{m['eq8']:.1f} ms, Eq. 8 (hungarian) {m['eq8_hungarian']:.1f} ms, Eq. 7 (no OT) {m['eq7']:.1f} ms")
        print(f"   share of the Eq. 8 step in the OT loss: emd {m['emd'] / m['eq8']:.1%} (alone) / "
              f"{(m['eq8'] - m['eq7']) / m['eq8']:.1%} (step difference); hungarian {m['hungarian'] / m['eq8_hungarian']:.1%} / "
              f"{(m['eq8_hungarian'] - m['eq7']) / m['eq8_hungarian']:.1%}")


if __name__ == "__main__":
    main()
