"""The density-ratio discriminator's update with the q and p batches stacked in one pass (`logits_of_both`, the
library's) against two passes (one per batch), on this CPU: the update alone (TCWAE's and FactorVAE's MLP, six layers
of 1,000 units, batch 64 + 64, Adam), then a whole training step of the zoo's FactorVAE (γ = 35) and of the tcwae `cpu`
scale's TCWAE-GAN row (its model, sampler and batch), alternating the two in one process; prints ms or images/s and
the ratio, checks that both give the same loss up to rounding, writes `benchmarks/density_ratio.json`.

    python3 benchmarks/bench_density_ratio.py [--steps 30] [--repeats 2] [--threads 2] [--precision auto]
"""
import argparse, dataclasses, json, sys, time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

import disentbook.objectives.density_ratio as DR  # noqa: E402
from disentbook.core import cpu_name  # noqa: E402
from disentbook.data.dsprites import DSprites  # noqa: E402
from disentbook.data.samplers import SingleSampler  # noqa: E402
from disentbook.training.config import TrainConfig  # noqa: E402
from disentbook.training.run import RunSpec, build_run  # noqa: E402
from disentbook.repro.plan import paper_jobs  # noqa: E402
from disentbook.repro.runs import job_run, sampler_fn, setup_job, train_config, train_data  # noqa: E402

MODEL = dict(kind="vae", image_size=64, channels=1, latent_dim=10, likelihood="bernoulli", hidden=256)
STACKED = DR.logits_of_both


def two_passes(disc, q_inputs, p_inputs):
    "The former way: one pass of `disc` per batch."
    as_tuple = lambda x: (x,) if isinstance(x, torch.Tensor) else tuple(x)
    return disc(*as_tuple(q_inputs)), disc(*as_tuple(p_inputs))


@contextmanager
def passes(way):
    "Make the library's losses score the two batches `way` (STACKED or two_passes) inside the block."
    DR.logits_of_both = way
    try: yield
    finally: DR.logits_of_both = STACKED


def update_ms(steps: int, way) -> tuple[float, float]:
    "(ms per Adam update of the 6 x 1,000 discriminator on 64 + 64 codes, the first update's loss)."
    torch.manual_seed(0)
    d = DR.DensityRatio(10, 1000, 6)
    opt = torch.optim.Adam(d.parameters(), lr=1e-4, betas=(0.5, 0.9))
    q, p = torch.randn(64, 10), torch.randn(64, 10)
    with passes(way):
        def step():
            opt.zero_grad(); loss = DR.density_ratio_loss(d, q, p); loss.backward(); opt.step(); return loss.item()
        first = step()
        for _ in range(4): step()
        t0 = time.perf_counter()
        for _ in range(steps): step()
    return (time.perf_counter() - t0) / steps * 1000, first


def zoo_trainer(precision: str):
    data = DSprites()
    cfg = TrainConfig(steps=10**6, batch_size=64, lr=5e-4, device="cpu", precision=precision, progress=False, log_every=10**6)
    return build_run(RunSpec("factor_vae", dict(gamma=35.0), MODEL, cfg), SingleSampler(data, device="cpu"), data=data, resume=False)


def tcwae_trainer(precision: str):
    "The tcwae `cpu` scale's TCWAE-GAN row (its first seed), built as the harness builds it."
    _, jobs, _ = paper_jobs("tcwae", "cpu", device="cpu")
    job = next(j for j in jobs if j["spec"]["objective"] == "tcwae_gan")
    paper, cfg, data, model_config = setup_job(job)
    train = train_config(cfg, int(job["seed"]), "cpu", data, False, precision)
    run = job_run(job, cfg, model_config, train)
    run = dataclasses.replace(run, out_dir=None, train=dataclasses.replace(run.train, steps=10**6, log_every=10**6))
    return build_run(run, sampler_fn(paper, data)("cpu"), data=train_data(data), device="cpu", resume=False)


def step_rate(make, steps: int, way) -> tuple[float, torch.Tensor]:
    "(images/s of `steps` training steps after 5 warm-up ones, the model's weights after them) of a fresh trainer, scoring `way`."
    with passes(way):
        t = make()
        for _ in range(5): t.train_step()
        t0 = time.perf_counter()
        for _ in range(steps): t.train_step()
        rate = steps * t.config.batch_size / (time.perf_counter() - t0)
    return rate, torch.cat([v.detach().float().flatten() for v in t.model.state_dict().values()])


def main(argv=None):
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--steps", type=int, default=30); a.add_argument("--repeats", type=int, default=2)
    a.add_argument("--threads", type=int, default=2); a.add_argument("--precision", default="auto")
    a.add_argument("--out", default=str(ROOT / "benchmarks" / "density_ratio.json"))
    args = a.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for rep in range(args.repeats):
        (two, l2), (one, l1) = update_ms(args.steps, two_passes), update_ms(args.steps, STACKED)
        assert abs(l1 - l2) <= 1e-6 * max(1.0, abs(l2)), (l1, l2)          # the same weights, the same loss
        rows.append(dict(what="discriminator update", repeat=rep, two_passes_ms=round(two, 2), stacked_ms=round(one, 2), ratio=round(two / one, 3)))
        print(f"discriminator update   repeat {rep}: two passes {two:6.1f} ms, stacked {one:6.1f} ms ({two / one:.2f}x)", flush=True)
        for name, make in (("factor_vae (zoo)", lambda: zoo_trainer(args.precision)), ("tcwae_gan (tcwae cpu)", lambda: tcwae_trainer(args.precision))):
            (r2, w2), (r1, w1) = step_rate(make, args.steps, two_passes), step_rate(make, args.steps, STACKED)
            drift = float((w1 - w2).abs().max() / w2.abs().max())        # the same training, up to rounding
            rows.append(dict(what=name, repeat=rep, two_passes=round(r2, 1), stacked=round(r1, 1), ratio=round(r1 / r2, 3),
                             weights_max_rel_diff=drift))
            print(f"{name:22s} repeat {rep}: two passes {r2:6.1f} images/s, stacked {r1:6.1f} ({r1 / r2:.2f}x); the model's "
                  f"weights after {args.steps + 5} steps differ by at most {drift:.1e} of the largest", flush=True)
    out = dict(machine=cpu_name(), threads=args.threads, torch=torch.__version__, steps=args.steps, precision=args.precision, rows=rows)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {Path(args.out).name}")


if __name__ == "__main__":
    main()
