"""The trainer's step on this CPU in fp32 with the conv weights in the default layout against channels-last
(`TrainConfig(channels_last=True)`), the dSprites conv64 models of the zoo (β-VAE; FactorVAE, whose discriminator is an
MLP), batch 64, in one process, alternating the two layouts; prints images/s and the ratio, writes
`benchmarks/channels_last.json`. With `--paper NAME`, the same for one run of each objective of that reproduction at
`--scale` (its own model, sampler and batch size), written to `benchmarks/channels_last_NAME.json`.

    python3 benchmarks/bench_channels_last.py [--steps 40] [--repeats 2] [--threads 2] [--paper contrastive --scale cpu]
"""
import argparse, dataclasses, json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

from disentbook.core import cpu_name  # noqa: E402
from disentbook.data.dsprites import DSprites  # noqa: E402
from disentbook.data.samplers import SingleSampler  # noqa: E402
from disentbook.training.config import TrainConfig  # noqa: E402
from disentbook.training.run import RunSpec, build_run  # noqa: E402
from disentbook.repro.plan import paper_jobs  # noqa: E402
from disentbook.repro.runs import job_run, sampler_fn, setup_job, train_config, train_data  # noqa: E402

METHODS = {"beta_vae": dict(beta=4.0), "factor_vae": dict(gamma=35.0)}
MODEL = dict(kind="vae", image_size=64, channels=1, latent_dim=10, likelihood="bernoulli", hidden=256)


def _time(t, steps: int) -> float:
    "Images/s of `steps` of trainer `t` after 5 warm-up steps (oneDNN picks its kernels), in the layout `Trainer.fit` uses."
    t._memory_format(torch.channels_last)
    for _ in range(5): t.train_step()
    t0 = time.perf_counter()
    for _ in range(steps): t.train_step()
    return steps * t.config.batch_size / (time.perf_counter() - t0)


def images_per_s(data, method: str, cl: bool, steps: int) -> float:
    cfg = TrainConfig(steps=10**6, batch_size=64, lr=5e-4, device="cpu", precision="fp32", progress=False, log_every=10**6,
                      channels_last=cl)
    return _time(build_run(RunSpec(method, METHODS[method], MODEL, cfg), SingleSampler(data, device="cpu"), data=data, resume=False), steps)


def paper_runs(name: str, scale: str) -> list:
    "One job of each objective of reproduction `name` at `scale` (the first seed it trains), on the CPU."
    _, jobs, _ = paper_jobs(name, scale, device="cpu")
    first = {}
    for j in jobs: first.setdefault(j["spec"]["objective"], j)
    return list(first.values())


def paper_images_per_s(job: dict, cl: bool, steps: int) -> float:
    "Images/s of `job`'s trainer (its model, objective, sampler and batch size) in fp32, channels-last or not."
    paper, cfg, data, model_config = setup_job(job)
    train = train_config(cfg, int(job["seed"]), "cpu", data, False, "fp32")
    run = job_run(job, cfg, model_config, train)
    run = dataclasses.replace(run, out_dir=None, train=dataclasses.replace(run.train, steps=10**6, log_every=10**6, channels_last=cl))
    return _time(build_run(run, sampler_fn(paper, data)("cpu"), data=train_data(data), device="cpu", resume=False), steps)


def main_paper(args):
    rows = []
    for job in paper_runs(args.paper, args.scale):
        name = f'{job["spec"]["slug"]} ({job["dataset"]})'
        for rep in range(args.repeats):
            r = {cl: paper_images_per_s(job, cl, args.steps) for cl in (False, True)}
            rows.append(dict(run=name, objective=job["spec"]["objective"], repeat=rep, default=round(r[False], 1),
                             channels_last=round(r[True], 1), ratio=round(r[True] / r[False], 3)))
            print(f"{name:40s} repeat {rep}: default {r[False]:7.1f} images/s, channels-last {r[True]:7.1f} "
                  f"({r[True] / r[False]:.2f}x)", flush=True)
    out = dict(machine=cpu_name(), threads=args.threads, torch=torch.__version__, steps=args.steps, paper=args.paper,
               scale=args.scale, precision="fp32", rows=rows)
    Path(args.out or ROOT / "benchmarks" / f"channels_last_{args.paper}.json").write_text(json.dumps(out, indent=1) + "\n")


def main(argv=None):
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--steps", type=int, default=40); a.add_argument("--repeats", type=int, default=2)
    a.add_argument("--threads", type=int, default=2); a.add_argument("--out", default=None)
    a.add_argument("--paper", default=None, help="a reproduction's runs instead of the zoo's models")
    a.add_argument("--scale", default="cpu")
    args = a.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.paper: return main_paper(args)
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
    Path(args.out or ROOT / "benchmarks" / "channels_last.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__": main()
