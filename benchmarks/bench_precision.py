"""Does bf16 learn as fp32 does? The same methods and seeds trained in fp32 and in bf16 autocast (channels-last weights on
a CPU), a few thousand steps each through `disentbook train`'s own job, compared on their final losses and metrics
against the spread between the fp32 seeds.

    python3 benchmarks/bench_precision.py                 # every method (resumes: finished runs are kept)
    python3 benchmarks/bench_precision.py --report        # the table from the runs done so far

Methods: beta_vae (β = 4) and factor_vae, and one model of each other paper (dip_vae_i, tcwae_mws on dSprites;
contrastive_w2 on Grassy-MNIST, srb_vae on the digit-style set, swap_invariance on Colored-MNIST): the dSprites ones at
the settings of the campaign's zoo (`disentbook.campaign.zoo.SETTINGS`), the others at those of the shipped models. Metrics: MIG on 5,000 fresh dSprites images; the shipped models' card metrics for the others. A
quantity passes when the bf16 mean lies within the fp32 seeds' range widened by half that range on each side (the
spread between fp32 seeds is the yardstick: a bf16 mean no further from the fp32 mean than the fp32 seeds are from each
other). Writes `benchmarks/precision.json` and prints the table (markdown). Each finished run's result (its settings,
final losses, metrics, seconds) is kept in the checkout, `benchmarks/precision_runs/METHOD/PRECISION/seedK.json`, so a
later call on another machine goes on from there; a run whose settings changed since (say, the dSprites recipes' width)
is trained again.
"""
from __future__ import annotations
import argparse, json, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = ROOT / "results" / "campaign" / "precision"            # working folders (checkpoints; ignored by git)
KEPT = ROOT / "benchmarks" / "precision_runs"                 # each run's result.json (committed)
OUT = ROOT / "benchmarks" / "precision.json"
SEEDS = (0, 1, 2)
STEPS = 1500
THREADS = 2
# method -> (dataset, objective parameters, data parameters, settings other than the zoo's (None: a dSprites method at the
# zoo's settings), the metrics compared); factor_vae first: the method whose bf16 runs once diverged where fp32 did not
SMALL = dict(batch_size=32, lr=1e-3, hidden=64, latent_dim=10, z_dim=16, s_dim=8)      # the shipped models' settings
METHODS = {
    "factor_vae": ("dsprites", dict(gamma=35.0), {}, None, ("mig",)),
    "beta_vae": ("dsprites", dict(beta=4.0), {}, None, ("mig",)),
    "dip_vae_i": ("dsprites", dict(lambda_od=10.0), {}, None, ("mig",)),
    "tcwae_mws": ("dsprites", dict(beta=50.0, gamma=100.0), {}, None, ("mig",)),
    "contrastive_w2": ("grassy", {}, dict(per_digit=713), SMALL, ("clustering_s/accuracy/target",)),
    "srb_vae": ("digit_style", dict(disc_hidden=64), {}, dict(SMALL, z_dim=8, s_dim=8),
                ("refvae/avg_mae_e/probe_test", "refvae/rec_l1/probe_test")),
    "swap_invariance": ("colored_mnist", dict(beta_sup=1.0, reduction="pixel_mean"), {}, dict(SMALL, batch_size=64, latent_dim=20),
                        ("invariance/avg_acc_train/z_p", "invariance/avg_acc/z_p")),
}


def settings(method: str) -> dict:
    "Batch size, lr and model sizes a method trains with here."
    from disentbook.campaign.zoo import SETTINGS
    own = METHODS[method][3]
    return dict(own) if own else dict({k: SETTINGS[k] for k in ("batch_size", "lr", "hidden", "latent_dim")}, z_dim=16, s_dim=8)


def run(method: str, precision: str, seed: int, steps: int = STEPS) -> dict:
    "Train one (method, precision, seed) run unless done; returns its result (final losses, metrics, seconds)."
    out = RUNS / method / precision / f"seed{seed}"
    dataset, params, data_params, _, keys = METHODS[method]
    recipe, st = method, settings(method)
    want = dict(steps=steps, batch_size=st["batch_size"], lr=st["lr"], hidden=st["hidden"], latent_dim=st["latent_dim"],
                params=params)
    done = KEPT / method / precision / f"seed{seed}.json"
    if done.is_file():
        got = json.loads(done.read_text())
        if got.get("settings") == want: return got
    from disentbook.jobs import train_job
    from disentbook.training.checkpoints import load_model
    t0 = time.perf_counter()
    r = train_job(method=method, dataset=dataset, params=params, steps=steps, batch_size=st["batch_size"], lr=st["lr"],
                  latent_dim=st["latent_dim"], z_dim=st["z_dim"], s_dim=st["s_dim"], hidden=st["hidden"], out_dir=out,
                  device="cpu", seed=seed, data_params=data_params, evaluate=False, threads=THREADS, precision=precision,
                  overwrite=True)
    seconds = time.perf_counter() - t0
    h = r["history"]
    last = h[h["step"] > steps - 300]
    res = dict(method=method, precision=r["precision"], seed=seed, steps=steps, settings=want, seconds=round(seconds, 1),
               losses={c: float(last[c].mean()) for c in h.columns if c != "step"})
    model = load_model(out / "checkpoint", device="cpu")
    if dataset == "dsprites":
        from disentbook.campaign.zoo import CURVE_IMAGES, measure
        m = measure(model, CURVE_IMAGES, num_points=5000)
        res["metrics"] = {"mig": m["mig"], "factor_vae": m["factor_vae"], "active": m["active"]}
    else:
        from disentbook.classroom import pretrained as P
        card = dict(name=recipe, method=method, dataset=dataset, params=params, model=model.config, weights="-",
                    sha256="-", evaluation=P.EVALUATIONS[dataset])
        (out / f"{recipe}.json").write_text(json.dumps(card))
        res["metrics"] = {k: v for k, v in P.measure(recipe, root=out, model=model, gate=False).items()
                          if isinstance(v, float)}
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(res, indent=1) + "\n")
    print(f"{method} {precision} seed {seed}: {seconds:.0f} s, loss {res['losses'].get('loss', float('nan')):.4g}, "
          + ", ".join(f"{k} {res['metrics'].get(k, float('nan')):.3f}" for k in keys), flush=True)
    return res


def compare(results: list[dict]) -> list[dict]:
    "One row per (method, quantity): fp32 and bf16 means and ranges over seeds, and whether bf16 is within the fp32 spread."
    rows = []
    for method, (*_, keys) in METHODS.items():
        by = {p: [r for r in results if r["method"] == method and r["precision"] == p] for p in ("fp32", "bf16")}
        if len(by["fp32"]) < 2 or not by["bf16"]: continue      # no spread to compare with: not judged yet
        for q in ["loss", *keys]:
            get = (lambda r: r["losses"].get("loss")) if q == "loss" else (lambda r, q=q: r["metrics"].get(q))
            a = np.array([get(r) for r in by["fp32"]], float); b = np.array([get(r) for r in by["bf16"]], float)
            lo, hi = a.min(), a.max(); w = hi - lo
            rows.append(dict(method=method, quantity=q, n_fp32=len(a), n_bf16=len(b), fp32_mean=float(a.mean()),
                             fp32_min=float(lo), fp32_max=float(hi), bf16_mean=float(b.mean()), bf16_min=float(b.min()),
                             bf16_max=float(b.max()), within=bool(lo - w / 2 <= b.mean() <= hi + w / 2),
                             seconds_fp32=float(np.mean([r["seconds"] for r in by["fp32"]])),
                             seconds_bf16=float(np.mean([r["seconds"] for r in by["bf16"]]))))
    return rows


def markdown(rows: list[dict]) -> str:
    L = ["| method | quantity | fp32 mean [min, max] | bf16 mean [min, max] | bf16 within the fp32 spread | s/run fp32 → bf16 |",
         "|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['method']} | {r['quantity']} | {r['fp32_mean']:.4g} [{r['fp32_min']:.4g}, {r['fp32_max']:.4g}] "
                 f"(n={r['n_fp32']}) | {r['bf16_mean']:.4g} [{r['bf16_min']:.4g}, {r['bf16_max']:.4g}] (n={r['n_bf16']}) | "
                 f"{'yes' if r['within'] else '**no**'} | {r['seconds_fp32']:.0f} → {r['seconds_bf16']:.0f} |")
    return "\n".join(L)


def collect() -> list[dict]:
    "The kept results whose settings are today's (an older width or length is not compared)."
    out = []
    for f in sorted(KEPT.glob("*/*/seed*.json")):
        r = json.loads(f.read_text())
        if r.get("method") not in METHODS: continue
        st = settings(r["method"])
        if (r.get("settings") or {}).get("hidden") == st["hidden"] and r.get("steps") == STEPS: out.append(r)
    return out


def write(rows: list[dict]):
    from disentbook.core import describe_device
    import torch
    OUT.write_text(json.dumps(dict(what=__doc__.split("\n")[0], device=describe_device("cpu"), torch=torch.__version__,
                                   steps=STEPS, seeds=list(SEEDS), rule="bf16 mean within [fp32 min - w/2, fp32 max + w/2], "
                                   "w = fp32 max - fp32 min", rows=rows), indent=1) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("methods", nargs="*", help=f"default: all of {', '.join(METHODS)}")
    p.add_argument("--report", action="store_true", help="only the table of the runs done so far")
    a = p.parse_args(argv)
    if not a.report:
        for m in a.methods or METHODS:
            for seed in SEEDS:
                for prec in ("fp32", "bf16"): run(m, prec, seed)
    rows = compare(collect()); write(rows); print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
