"""Does the batch size hold TCWAE-MWS back? The MWS estimate of log q(z) at batch 64 against the paper's 256.

TCWAE-MWS estimates log q(z_i) from the batch alone (the paper's Eq. 10): logsumexp_j log q(z_i | x_j) - log(N * B). The
paper's Table 1 trains at batch 256 "in order to reduce the bias of the MWS estimator"; the package's `cpu` scale keeps
the `quick` scale's batch of 64, on two CPU cores. This script measures, for a trained TCWAE-MWS model:

* the **self-share**: how much of each sample's estimate of q(z_i) comes from its own posterior q(z_i | x_i), at batch
  64, 256 and 1,024 (1 / B when the batch's posteriors all overlap; 1 when only its own covers z_i, where the estimate of
  the total correlation has nothing but a constant to go on), for the joint code and per latent (the marginals);
* with `--pilot`: the same row trained at batch 256 on as many images as the `cpu` scale's run sees (its steps x 64 /
  256; seed 0, the `quick` scale's other settings, as the learning curves), scored beside the batch-64 run by the
  `cpu` scale's evaluation (MIG, FactorVAE score, SAP, reconstruction).

    python3 benchmarks/diagnose_mws_batch.py                 # the self-share (seconds)
    python3 benchmarks/diagnose_mws_batch.py --pilot         # ... and the batch-256 pilot (about 10 minutes, 2 cores)

Reads the batch-64 run of the row's learning curve, seed 0 (the campaign's `curves-tcwae-seeds` stage:
`results/campaign/papers/tcwae/<row>/seed0/checkpoint`, or `--checkpoint`); writes `benchmarks/mws_batch-tcwae.json`.
"""
from __future__ import annotations
import argparse, json, platform, sys, tempfile, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ROW = "tcwae_mws_beta50_xent_gamma100"
BATCHES = (64, 256, 1024)


def self_share(z, mu, logvar) -> tuple[float, float]:
    """(joint, per-latent) mean weight of each sample's own posterior in the batch estimate of its density: for the
    joint code exp(log q(z_i|x_i) - logsumexp_j log q(z_i|x_j)), and the same per latent, averaged over samples (and
    latents)."""
    import torch
    from disentbook.objectives.tcwae import pairwise_log_density
    lp = pairwise_log_density(z, mu, logvar)                       # (B, B, D): log q(z_i,d | x_j)
    joint = lp.sum(-1)
    own = (joint.diagonal() - torch.logsumexp(joint, 1)).exp().mean()
    per = (lp.diagonal(dim1=0, dim2=1).T - torch.logsumexp(lp, 1)).exp().mean()
    return float(own), float(per)


def measure_shares(model, repeats: int = 4) -> dict:
    "{batch: dict(joint, per_latent, posterior_std)} on fresh dSprites batches (seeds 100, 101, ...), z drawn with seed 0."
    import torch
    from disentbook.core import to_float_images
    from disentbook.data.dsprites import DSprites
    data, out = DSprites(), {}
    g = torch.Generator().manual_seed(0)
    for b in BATCHES:
        rows = []
        for r in range(repeats):
            x, _ = data.sample(b, np.random.default_rng(100 + r))
            with torch.no_grad():
                mu, lv = (t.float() for t in model.eval().encode(to_float_images(x)))
                z = mu + (0.5 * lv).exp() * torch.randn(mu.shape, generator=g)
                rows.append((*self_share(z, mu, lv), float((0.5 * lv).exp().mean())))
        j, p, s = np.mean(rows, 0)
        out[str(b)] = dict(joint=round(float(j), 4), per_latent=round(float(p), 4), posterior_std=round(float(s), 4))
    return out


def cpu_evaluation(model, paper, spec, data) -> dict:
    "The `cpu` scale's evaluation of the row (seed 0): reconstruction, MIG, FactorVAE score, SAP."
    from disentbook.repro.declare import PAPERS, scale_config
    from disentbook.repro.runs import run_cfg
    table = next(t for t in paper.tables if t.name == "Table 1a")
    rc = run_cfg(table.run_config(scale_config(paper, "cpu")), spec, table.dataset_name({**paper.options, "scale": "cpu"}))
    m = paper.evaluate(model.eval(), data, rc, 0, spec)
    return {k: round(float(m[k]), 4) for k in ("rec", "mig", "factorvae", "sap")}


def pilot(batch_64_checkpoint: Path, cpu_steps: int) -> dict:
    """Train the row at batch 256 on cpu_steps x 64 images (the learning curves' setup, `campaign.papers.PaperRow`, in a
    temporary folder), score it and the batch-64 run by the cpu evaluation."""
    from disentbook.campaign.papers import PaperRow
    from disentbook.repro.runs import build_trainer
    from disentbook.training.checkpoints import load_model
    steps, row = cpu_steps * 64 // 256, PaperRow("tcwae", ROW)
    paper, spec = row.paper, row.spec
    with tempfile.TemporaryDirectory() as d:
        job = dict(row.job(d, 0), out=str(Path(d) / "run"), cfg=dict(row.cfg, train={**row.cfg["train"], "batch_size": 256}))
        tr, data, _ = build_trainer(job, steps=steps)
        t0 = time.monotonic(); tr.fit(); secs = time.monotonic() - t0
        got256 = cpu_evaluation(tr.model, paper, spec, data)
        shares256 = measure_shares(tr.model)
    got64 = cpu_evaluation(load_model(batch_64_checkpoint, device="cpu"), paper, spec, data)
    return dict(batch_64=dict(steps=cpu_steps, images=cpu_steps * 64, **got64),
                batch_256=dict(steps=steps, images=steps * 256, train_seconds=round(secs, 1), precision=tr.precision,
                               self_share=shares256, **got256))


def main(argv=None):
    import torch
    from disentbook.repro.declare import PAPERS, scale_config
    from disentbook.repro.runs import run_cfg
    from disentbook.training.checkpoints import load_model
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", help="the batch-64 TCWAE-MWS checkpoint (default: the learning curve's at the cpu length)")
    p.add_argument("--pilot", action="store_true", help="also train the batch-256 pilot (about 10 minutes on 2 cores)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "mws_batch-tcwae.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    steps = scale_config(PAPERS["tcwae"], "cpu")["train"]["steps"]
    from disentbook.campaign.papers import PaperRow
    ck = Path(a.checkpoint) if a.checkpoint else PaperRow("tcwae", ROW).run_dir(ROOT, 0) / "checkpoint"
    if not (ck / "config.json").is_file():
        raise SystemExit(f"diagnose_mws_batch: no checkpoint at {ck} (run python3 -m disentbook campaign --stage "
                         "curves-tcwae-seeds, or pass --checkpoint)")
    res = dict(row=ROW, checkpoint=str(ck.relative_to(ROOT)) if ck.is_relative_to(ROOT) else str(ck), cpu_steps=steps,
               self_share_batch_64_run=measure_shares(load_model(ck, device="cpu")))
    for b, s in res["self_share_batch_64_run"].items():
        print(f"batch-64 run, estimate at batch {b:>5}: self-share {s['joint']:.3f} (joint), {s['per_latent']:.3f} per latent")
    if a.pilot:
        res["pilot"] = pilot(ck, steps)
        for k, v in res["pilot"].items():
            print(f"{k}: {v['steps']:,} steps, {v['images']:,} images: MIG {v['mig']:.3f}, FactorVAE {v['factorvae']:.3f}, "
                  f"SAP {v['sap']:.3f}, Rec {v['rec']:.2f}")
    res["machine"] = dict(cpu=platform.processor() or platform.machine(), threads=a.threads, torch=torch.__version__)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
