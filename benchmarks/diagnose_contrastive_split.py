"""Where does the digit go? The L-MNIST models of the contrastive paper, seed by seed, early in training.

Every L-MNIST claim of the contrastive reproduction needs the salient code s_x to carry the digit and the common code
z_x not to (the paper's Table 1: CA_s 89-92 %, CA_z 12-13 % for cVAE and both of its objectives). The package's runs so
far put much of the digit into z. This script measures, for the `cpu` scale's model and data (L-MNIST, `quick`'s
settings: batch 64, lr 1e-3, FC width 128, Gaussian likelihood with scale 0.1, 700 digits per class), how the digit's
information splits between z and s across seeds (the seed sets the initialisation and the data stream), for three of
the Table-1 objectives at the same length:

* **seeds**: cVAE (Eq. 4), Ours Eq. 7 and Ours Eq. 8, seeds 0-5, 500 steps each, scored by the reproduction's own
  evaluation (t-SNE + k-means clustering accuracy of the digit from s_x and from z_x on held-out images, E‖s‖²);
* **likelihood**: Eq. 7, seed 0, 2,000 steps, with a Bernoulli likelihood (the paper's decoder ends in a sigmoid; its
  loss is not stated) and with a Gaussian of variance 1/2 (the plain squared error summed over pixels), against the package's Gaussian of scale 0.1: how much of a code each learns at all (its KL).

    python3 benchmarks/diagnose_contrastive_split.py            # every run not done yet (about 12 minutes, 2 cores)
    python3 benchmarks/diagnose_contrastive_split.py --report   # the tables from the runs done so far

Each finished run is kept in `benchmarks/contrastive_split.json` at once (a later call goes on from there).
"""
from __future__ import annotations
import argparse, copy, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "contrastive_split.json"
OBJECTIVES = {"cvae": "cVAE (Eq. 4)", "contrastive_w2_dirac": "Ours (Eq. 7)", "contrastive_w2": "Ours (Eq. 8)"}
SEEDS, SEED_STEPS = range(6), 500
LIKELIHOODS = {"gaussian-0.1": dict(likelihood="gaussian", scale=0.1),      # the package's (every scale)
               "bernoulli": dict(likelihood="bernoulli"),
               "gaussian-0.707": dict(likelihood="gaussian", scale=0.5 ** 0.5)}
LIK_STEPS = 2000
KEEP = ("ca_s", "ca_z", "ss_s", "ss_z", "s_x_norm2", "s_y_norm2", "l_w2", "rec_error_x", "mean_image_error_x", "chance_ca")


def runs() -> list[dict]:
    "Every run of the diagnosis, in the order it trains."
    out = [dict(part="seeds", objective=o, seed=s, steps=SEED_STEPS, likelihood="gaussian-0.1") for o in OBJECTIVES for s in SEEDS]
    out += [dict(part="likelihood", objective="contrastive_w2_dirac", seed=0, steps=LIK_STEPS, likelihood=k) for k in LIKELIHOODS]
    return out


def key(r: dict) -> str: return f"{r['part']}/{r['objective']}/{r['likelihood']}/seed{r['seed']}/{r['steps']}"


def train_one(r: dict) -> dict:
    "Train and score one run the way the reproduction does (seeded before the model is built)."
    import torch
    from disentbook.core import seed_everything
    from disentbook.objectives.base import make_objective
    from disentbook.repro import contrastive_eval as ce
    from disentbook.repro.contrastive import CONTRASTIVE_SCALES
    from disentbook.training.config import TrainConfig
    from disentbook.training.trainer import Trainer
    torch.set_num_threads(2)
    cfg = copy.deepcopy(CONTRASTIVE_SCALES["cpu"]); cfg["dataset"] = "L-MNIST"
    cfg["model"] = dict(hidden=cfg["model"]["hidden"], **LIKELIHOODS[r["likelihood"]])
    data = ce.contrastive_data("L-MNIST", cfg, r["seed"], {})
    seed_everything(r["seed"])
    model = ce.contrastive_model(None, data, cfg)
    obj = make_objective(r["objective"], model=model, data=data.train)
    t = cfg["train"]
    tr = Trainer(model, obj, ce.contrastive_sampler(data, "cpu"), TrainConfig(seed=r["seed"], steps=r["steps"], batch_size=t["batch_size"],
                                                                  lr=t["lr"], log_every=100, progress=False))
    t0 = time.time(); tr.fit()
    secs = time.time() - t0
    m = ce.evaluate_contrastive(model, data, cfg, r["seed"], {})
    h = tr.history.tail(5).mean(numeric_only=True)               # the last five logged rows (every 100 steps)
    return dict(r, **{k: round(float(m[k]), 5) for k in KEEP}, kl_x=round(float(h["kl_x"]), 3), kl_y=round(float(h["kl_y"]), 3),
                precision=tr.precision, train_seconds=round(secs, 1))


def report(done: dict) -> str:
    lines = [f"Seeds (L-MNIST, {SEED_STEPS} steps of 64, the `cpu` scale's model; CA in %, held-out images):", "",
             "| objective | seed | CA_s | CA_z | E‖s_x‖² | E‖s_y‖² | KL of x (z + s)¹ | KL of y (z)¹ |", "|---|---|---|---|---|---|---|---|"]
    for o, name in OBJECTIVES.items():
        rs = [done[key(r)] for r in runs() if r["part"] == "seeds" and r["objective"] == o and key(r) in done]
        for x in rs:
            lines.append(f"| {name} | {x['seed']} | {x['ca_s']:.1f} | {x['ca_z']:.1f} | {x['s_x_norm2']:.2f} | {x['s_y_norm2']:.2f} | "
                         f"{x['kl_x']:.1f} | {x['kl_y']:.1f} |")
        if rs:
            cs, cz = [x["ca_s"] for x in rs], [x["ca_z"] for x in rs]
            lines.append(f"| {name}: range over {len(rs)} seeds | | {min(cs):.1f}-{max(cs):.1f} | {min(cz):.1f}-{max(cz):.1f} | | | | |")
    allr = [done[key(r)] for r in runs() if r["part"] == "seeds" and key(r) in done]
    if len(allr) > 2:
        import numpy as np
        r = float(np.corrcoef([x["ca_s"] for x in allr], [x["ca_z"] for x in allr])[0, 1])
        lines += ["", "¹ nats, the mean of the last five logged values (one every 100 steps)."]
        lines += ["", f"Across these {len(allr)} runs, CA_s and CA_z correlate at r = {r:.2f} (the digit is shared out between the two codes)."]
    lines += ["", f"Likelihood (Ours Eq. 7, seed 0, {LIK_STEPS} steps):", "",
              "| likelihood | CA_s | CA_z | KL of x (z + s) | KL of y (z) | reconstruction error / pixel (mean image's) |", "|---|---|---|---|---|---|"]
    for r in runs():
        if r["part"] == "likelihood" and key(r) in done:
            x = done[key(r)]
            lines.append(f"| {r['likelihood']} | {x['ca_s']:.1f} | {x['ca_z']:.1f} | {x['kl_x']:.2f} | {x['kl_y']:.2f} | "
                         f"{x['rec_error_x']:.4f} ({x['mean_image_error_x']:.4f}) |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="print the tables from the runs done so far; train nothing")
    a = ap.parse_args(argv)
    state = json.loads(OUT.read_text()) if OUT.exists() else dict(machine=dict(cpu=platform.processor() or platform.machine()), runs={})
    done = state["runs"]
    if not a.report:
        for r in runs():
            if key(r) in done: continue
            done[key(r)] = x = train_one(r)
            OUT.write_text(json.dumps(state, indent=1) + "\n")
            print(f"{key(r)}: CA_s {x['ca_s']:.1f} CA_z {x['ca_z']:.1f} ({x['train_seconds']:.0f} s)", flush=True)
    print(report(done))


if __name__ == "__main__":
    main()
