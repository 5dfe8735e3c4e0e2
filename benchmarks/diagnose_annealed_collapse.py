"""Why do most AnnealedVAE seeds learn nothing on dSprites, and does disentanglement_lib's learning rate change it?

The zoo's AnnealedVAE recipe (Burgess et al. 2018: the KL pushed to a capacity C that rises from 0 to 25 nats over
100,000 steps, weight γ = 1000; Glorot initial weights; Adam at the zoo's learning rate 5e-4) trained seed 0 into a code
whose MIG reaches 0.23, while seeds 1-4 met the capacity with codes that tell the decoder nothing: their Bernoulli
reconstruction stays at the value a decoder reaches without any code. This script measures:

* the **reference**: the negative log-likelihood of the best image that ignores the code (each pixel's mean over 10,000
  fresh images), the value an uninformative code reconstructs at;
* each measured seed of the recipe's learning curve at 5e-4 (`benchmarks/curves/zoo/pilots/annealed_vae-lr5e-4.json`,
  the zoo's record before this pilot): reconstruction and MIG at 2,500 and 5,000 steps, and whether its code is
  informative;
* with `--pilot`: the same recipe with Adam at `--lr` (default 1e-4, disentanglement_lib's for every model of its study),
  seeds 0-4 to 5,000 steps (the precision of the curve's runs), reconstruction at 2,500 and 5,000 steps and MIG at 5,000
  on the curve's choosing images.

The pilot's rule, declared before it ran: a seed's code is *informative* at a length when its reconstruction (the mean of
the last 500 logged steps) is at least 20 nats below the reference. The learning rate replaces the recipe's when, at
5,000 steps, at least four seeds of five are informative under it and their number is larger than under the recipe's
(1 of 5 at 2,500 steps). Anything else leaves the recipe as it is.

    python3 benchmarks/diagnose_annealed_collapse.py                 # the reference and the curve's seeds (seconds)
    python3 benchmarks/diagnose_annealed_collapse.py --pilot         # ... and the pilot (about 25 minutes on 2 cores)
    python3 benchmarks/diagnose_annealed_collapse.py --figure        # ... and the figure of the runs found here

Writes `benchmarks/annealed_collapse.json`; the pilot's runs go to `results/pilots/annealed_vae-lr<lr>/seed<k>`.
`--figure` draws `benchmarks/annealed_collapse.png`, each seed's reconstruction over its first 5,000 steps at each
learning rate, from the training histories of the runs in `results/pilots/annealed_vae-lr<lr>/` (the zoo's runs at
5e-4 moved there when the recipe changed).
"""
from __future__ import annotations
import argparse, json, platform, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MARGIN, AT, SEEDS = 20.0, (2500, 5000), (0, 1, 2, 3, 4)
PREFIX = "annealed_vae-lr"          # the pilots' run folders: results/pilots/annealed_vae-lr<lr>/seed<k>


def reference_nll(num: int = 10_000, seed: int = 0) -> float:
    "Mean Bernoulli NLL (nats per image) of each pixel's mean over `num` fresh dSprites images, on another `num`."
    from disentbook.data.dsprites import DSprites
    data = DSprites()
    rng = np.random.default_rng(seed)
    from disentbook.core import to_float_images
    draw = lambda: to_float_images(data.sample_observations_from_factors(data.sample_factors(num, rng), rng)).reshape(num, -1).double().numpy()
    fit, test = draw(), draw()
    p = np.clip(fit.mean(0), 1e-6, 1 - 1e-6)
    return float(-(test @ np.log(p) + (1 - test) @ np.log(1 - p)).mean())


def recon_at(history: Path, steps: int, window: int = 500) -> float:
    import pandas as pd
    h = pd.read_csv(history)
    h = h[(h["step"] <= steps) & (h["step"] > steps - window)]
    return float(h["recon"].mean()) if len(h) and h["step"].max() == steps else float("nan")


def pilot(lr: float, ref: float, precision: str) -> dict:
    from tqdm.auto import tqdm
    from disentbook.campaign import zoo
    from disentbook.jobs import train_job
    from disentbook.training.checkpoints import load_model
    r, s = zoo.recipe("annealed_vae"), zoo.SETTINGS
    out = {}
    for seed in tqdm(SEEDS, desc=f"pilot lr {lr:g}"):
        run = ROOT / "results" / "pilots" / f"{PREFIX}{lr:g}" / f"seed{seed}"
        t0 = time.monotonic()
        for i, L in enumerate(AT):
            train_job(method=r.method, dataset="dsprites", params=r.params, steps=L, batch_size=None if i else s["batch_size"],
                      lr=None if i else lr, latent_dim=s["latent_dim"], hidden=s["hidden"], out_dir=run, device="cpu",
                      seed=seed, evaluate=False, threads=s["threads"], precision=None if i else precision,
                      ckpt_every=zoo.CHUNK, resume=i > 0, overwrite=i == 0, channels_last=zoo.CHANNELS_LAST,
                      init=r.model.get("init"))
        secs = time.monotonic() - t0
        m = zoo.measure(load_model(run / "checkpoint", device="cpu"), zoo.CURVE_IMAGES)
        rec = {L: recon_at(run / "history.csv", L) for L in AT}
        out[str(seed)] = dict(recon={str(L): v for L, v in rec.items()}, mig_5000=m["mig"], active=m["active"],
                              informative={str(L): bool(v <= ref - MARGIN) for L, v in rec.items()},
                              train_seconds=round(secs, 1))
        print(f"lr {lr:g} seed {seed}: recon {rec[2500]:.1f} / {rec[5000]:.1f} at 2,500 / 5,000 steps, MIG {m['mig']:.3f} "
              f"at 5,000 ({secs:.0f} s)", flush=True)
    return out


def figure(ref: float, out: Path) -> list[str]:
    "Each seed's reconstruction (a 500-step running mean) over its first 5,000 steps, a colour per learning rate."
    import pandas as pd
    from disentbook.eval.viz import new_figure
    fig = new_figure((6.4, 3.4)); ax = fig.add_subplot()
    drawn = []
    for i, d in enumerate(sorted((ROOT / "results" / "pilots").glob(PREFIX + "*"), key=lambda d: -float(d.name[len(PREFIX):]))):
        for k, h in enumerate(sorted(d.glob("seed*/history.csv"))):
            t = pd.read_csv(h); t = t[t["step"] <= AT[-1]]
            ax.plot(t["step"], t["recon"].rolling(5, min_periods=1).mean(), color=f"C{i}", lw=0.9, alpha=0.8,
                    label=f"Adam {d.name[len(PREFIX):]}" if k == 0 else None)
            drawn.append(f"{d.name}/{h.parent.name}")
    ax.axhline(ref, color="k", ls=":", lw=1, label="a code that carries nothing")
    ax.set_ylim(ref - 200, ref + 60)               # the first few hundred steps, far above, are cut
    ax.set_xlabel("training steps"); ax.set_ylabel("reconstruction (nats per image)")
    ax.set_title("AnnealedVAE on dSprites: every seed, two learning rates", fontsize=9); ax.grid(alpha=0.3)
    ax.legend(fontsize=7); fig.tight_layout(); fig.savefig(out, dpi=110)
    return drawn


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pilot", action="store_true", help="train the recipe at --lr on seeds 0-4 to 5,000 steps")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--figure", action="store_true", help="draw benchmarks/annealed_collapse.png from the runs found here")
    a = ap.parse_args(argv)
    from disentbook.core import cpu_name
    ref = reference_nll()
    print(f"reference (each pixel's mean, no code): {ref:.1f} nats per image; informative: at least {MARGIN:g} below")
    curve = json.loads((ROOT / "benchmarks" / "curves" / "zoo" / "pilots" / "annealed_vae-lr5e-4.json").read_text())
    recipe = {}
    for seed, rows in sorted(curve["seeds"].items()):
        at = {r["steps"]: r for r in rows if r["steps"] in AT}
        recipe[seed] = {str(L): dict(recon=r["loss/recon"], mig=r["mig"], informative=bool(r["loss/recon"] <= ref - MARGIN))
                        for L, r in sorted(at.items())}
        print(f"lr {curve['settings']['lr']:g} seed {seed}: " + ", ".join(
            f"recon {v['recon']:.1f}, MIG {v['mig']:.3f} at {int(L):,}" for L, v in recipe[seed].items()))
    f = ROOT / "benchmarks" / "annealed_collapse.json"
    res = json.loads(f.read_text()) if f.is_file() else {}
    res.update(reference_nll=ref, margin=MARGIN, machine=cpu_name(), python=platform.python_version(),
               rule=__doc__.split("The pilot's rule, declared before it ran: ")[1].split("\n\n")[0].replace("\n", " "),
               recipe=dict(lr=curve["settings"]["lr"], seeds=recipe))
    if a.pilot:
        prec = {r.get("precision") for rows in curve["seeds"].values() for r in rows} - {None}
        runs = pilot(a.lr, ref, prec.pop() if len(prec) == 1 else "auto")
        n = sum(v["informative"]["5000"] for v in runs.values())
        n0 = sum(v.get("2500", {}).get("informative", False) for v in recipe.values())
        adopt = n >= 4 and n > n0
        res.setdefault("pilots", {})[f"{a.lr:g}"] = dict(seeds=runs, informative_5000=n, recipe_informative_2500=n0,
                                                         adopt=adopt)
        print(f"lr {a.lr:g}: {n} of {len(runs)} seeds informative at 5,000 steps (the recipe's lr: {n0} at 2,500): "
              + ("the rule adopts it" if adopt else "the rule keeps the recipe's learning rate"))
    if a.figure:
        res["figure"] = dict(file="benchmarks/annealed_collapse.png", runs=figure(ref, ROOT / "benchmarks" / "annealed_collapse.png"))
        print(f"benchmarks/annealed_collapse.png: {len(res['figure']['runs'])} runs")
    f.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
