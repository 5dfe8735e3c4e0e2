"""The trainer's step on this CPU in fp32 with the conv weights in the default layout against channels-last
(`TrainConfig(channels_last=True)`), the dSprites conv64 models of the zoo (β-VAE; FactorVAE, whose discriminator is an
MLP), batch 64, in one process, alternating the two layouts; prints images/s and the ratio, writes
`benchmarks/channels_last.json`.

    python3 benchmarks/bench_channels_last.py [--steps 40] [--repeats 2] [--threads 2]
"""
import argparse, json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

from disentbook.core import cpu_name  # noqa: E402
from disentbook.data.dsprites import DSprites  # noqa: E402
from disentbook.data.samplers import SingleSampler  # noqa: E402
from disentbook.training.config import TrainConfig  # noqa: E402
from disentbook.training.run import RunSpec, build_run  # noqa: E402

METHODS = {"beta_vae": dict(beta=4.0), "factor_vae": dict(gamma=35.0)}
MODEL = dict(kind="vae", image_size=64, channels=1, latent_dim=10, likelihood="bernoulli", hidden=256)


def images_per_s(data, method: str, cl: bool, steps: int) -> float:
    cfg = TrainConfig(steps=10**6, batch_size=64, lr=5e-4, device="cpu", precision="fp32", progress=False, log_every=10**6,
                      channels_last=cl)
    t = build_run(RunSpec(method, METHODS[method], MODEL, cfg), SingleSampler(data, device="cpu"), data=data, resume=False)
    t._memory_format(torch.channels_last)            # as `Trainer.fit` does while it trains
    for _ in range(5): t.train_step()                 # warm-up (oneDNN picks its kernels)
    t0 = time.perf_counter()
    for _ in range(steps): t.train_step()
    return steps * 64 / (time.perf_counter() - t0)


def main(argv=None):
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--steps", type=int, default=40); a.add_argument("--repeats", type=int, default=2)
    a.add_argument("--threads", type=int, default=2); a.add_argument("--out", default=str(ROOT / "benchmarks" / "channels_last.json"))
    args = a.parse_args(argv)
    torch.set_num_threads(args.threads)
    data, rows = DSprites(), []
    for method in METHODS:
        for rep in range(args.repeats):
            r = {cl: images_per_s(data, method, cl, args.steps) for cl in (False, True)}
            rows.append(dict(method=method, repeat=rep, default=round(r[False], 1), channels_last=round(r[True], 1),
                             ratio=round(r[True] / r[False], 3)))
            print(f"{method:11s} repeat {rep}: default {r[False]:7.1f} images/s, channels-last {r[True]:7.1f} "
                  f"({r[True] / r[False]:.2f}x)", flush=True)
    out = dict(machine=cpu_name(), threads=args.threads, torch=torch.__version__, steps=args.steps, batch_size=64,
               precision="fp32", rows=rows)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__": main()
