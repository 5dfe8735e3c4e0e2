"""GPU engine throughput (issue 15): β-VAE conv64 on 64×64 dSprites images, batch 64 per model, one run prints

  bare eager PyTorch loop fp32 and bf16 | disentbook `Trainer` (eager) | disentbook captured (`engine.CapturedStep`,
  fp32 and bf16) | ensembles of K = 8, 32, 64 β-VAEs (`engine.Ensemble`, captured; aggregate img/s, GPU memory per
  member) | the ratios, and the K at which the aggregate throughput stops growing (< 10 % more than the previous K).

    python benchmarks/bench_gpu.py [--steps 100] [--ks 8 32 64] [--device cuda|cpu] [--precision bf16]

Targets on one H100 at batch 64 (issue 15): captured single model >= 3x the bare eager fp32 loop; ensemble aggregate
>= 150,000 img/s; both with the numbers of eager training (tests/test_engine.py). Without a GPU the script runs a tiny
version (batch 8, few steps, K = 2 and 4) so that it is at least exercised; it says so, and its numbers say nothing
about a GPU.
"""
import argparse, time

import torch

from disentbook.core import default_device, make_generator, to_float_images
from disentbook.data.base import LabelledImages
from disentbook.data.dsprites import DSprites
from disentbook.data.samplers import SingleSampler
from disentbook.nets import VAE
from disentbook.objectives.vae import gaussian_kl
from disentbook.train import TrainConfig
from disentbook import engine

MODEL = dict(kind="vae", image_size=64, channels=1, latent_dim=10)


def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize()


def images(n, dev):
    "A materialised subset of procedural dSprites as uint8 labelled images on `dev` (throughput does not depend on N)."
    x, _ = DSprites().sample(n, make_generator(0))
    return LabelledImages(x, torch.zeros(n, dtype=torch.long), ["dsprites"], f"{n} dSprites images").to(dev)


def bare(data, steps, warm, batch, dev, bf16):
    "A bare eager loop: index uint8 images on the device, β-VAE loss, Adam (fused on CUDA)."
    torch.manual_seed(0)
    model = VAE().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, **(dict(fused=True) if dev.type == "cuda" else {}))
    g, imgs = make_generator(0, dev), data.images
    def step():
        x = to_float_images(imgs[torch.randint(len(imgs), (batch,), generator=g, device=dev)])
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16 and dev.type == "cuda"):
            out = model(x)
            loss = model.nll(out["x_out"].float(), x).mean() + 4.0 * gaussian_kl(out["mu"].float(), out["logvar"].float()).sum(1).mean()
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    for _ in range(warm): step()
    sync(dev); t = time.perf_counter()
    for _ in range(steps): step()
    sync(dev); return steps * batch / (time.perf_counter() - t)


def timed_fit(obj, steps, warm, dev):
    "Images/s of `obj.fit(steps)` after `obj.fit(warm)` (warm-up, capture)."
    obj.fit(warm); sync(dev); t = time.perf_counter()
    obj.fit(steps); sync(dev); return time.perf_counter() - t


def members(k):
    return [dict(objective="beta_vae", params=dict(beta=float(1 + i % 16)), seed=i) for i in range(k)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100); ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64); ap.add_argument("--ks", type=int, nargs="+", default=[8, 32, 64])
    ap.add_argument("--device", default=None); ap.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16"])
    a = ap.parse_args()
    dev = default_device(a.device)
    tiny = dev.type != "cuda"
    if tiny:
        a.steps, a.warm, a.batch, a.ks = 3, 1, 8, [2, 4]
        print(f"NO GPU ({dev}): a tiny CPU version (batch {a.batch}, {a.steps} steps, K = {a.ks}) only exercises the script; "
              "its numbers say nothing about a GPU.")
    else: print(f"device: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}")
    data = images(2_000 if tiny else 20_000, dev)
    sampler = SingleSampler(data, device=dev)
    cfg = lambda **kw: TrainConfig(**(dict(steps=10**9, batch_size=a.batch, lr=1e-4, log_every=50, device=str(dev),
                                            progress=False) | kw))
    rows = {}
    rows["bare eager fp32"] = bare(data, a.steps, a.warm, a.batch, dev, bf16=False)
    rows["bare eager bf16"] = bare(data, a.steps, a.warm, a.batch, dev, bf16=True)
    t = engine.build_run(members(1)[0], MODEL, sampler, cfg(amp=True), data=data)
    rows["disentbook Trainer (eager, amp)"] = a.steps * a.batch / timed_fit(t, a.steps, a.warm, dev)
    for prec in ("fp32", "bf16"):
        t = engine.build_run(members(1)[0], MODEL, sampler, cfg(amp=prec == "bf16"), data=data)
        cs = engine.CapturedStep(t, capture=not tiny, precision=prec)
        rows[f"disentbook captured {prec} ({cs.mode})"] = a.steps * a.batch / timed_fit(cs, a.steps, a.warm, dev)
    ens_rows, mem = {}, {}
    for k in a.ks:
        if dev.type == "cuda": torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(dev); m0 = torch.cuda.memory_allocated(dev)
        ts = [engine.build_run(m, MODEL, sampler, cfg(amp=a.precision == "bf16"), data=data) for m in members(k)]
        ens = engine.Ensemble(ts, capture=None if tiny else True, precision=a.precision)
        ens_rows[k] = a.steps * a.batch * k / timed_fit(ens, a.steps, a.warm, dev)
        rows[f"ensemble K={k} {a.precision} ({ens.mode}), aggregate"] = ens_rows[k]
        if dev.type == "cuda": mem[k] = (torch.cuda.max_memory_allocated(dev) - m0) / k / 2**20
        del ens, ts
    base = rows["bare eager fp32"]
    print(f"\n{'loop':<52} {'img/s':>12} {'x bare fp32':>12}")
    for name, v in rows.items(): print(f"{name:<52} {v:>12,.0f} {v / base:>12.2f}")
    cap = max(v for n, v in rows.items() if n.startswith("disentbook captured"))
    tr = rows["disentbook Trainer (eager, amp)"]
    print(f"\ncaptured / bare eager fp32: {cap / base:.2f} (target >= 3); captured / Trainer: {cap / tr:.2f}")
    best = max(ens_rows.values())
    print(f"best ensemble aggregate: {best:,.0f} img/s (target >= 150,000 on one H100); / Trainer: {best / tr:.1f}")
    for k, m in mem.items(): print(f"GPU memory per member at K={k}: {m:.0f} MiB (peak during training / K)")
    ks = sorted(ens_rows)
    stop = next((k for prev, k in zip(ks, ks[1:]) if ens_rows[k] < 1.1 * ens_rows[prev]), None)
    print(f"throughput stops growing at K = {stop}" if stop else f"throughput still grows at K = {ks[-1]} (try larger K)")
    if tiny: print("(tiny CPU run: none of these numbers is a GPU measurement)")


if __name__ == "__main__":
    main()
