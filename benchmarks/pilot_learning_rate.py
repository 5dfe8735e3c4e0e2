"""Does a zoo recipe disentangle more with Adam at 1e-4 (the learning rate of disentanglement_lib's study and of the
FactorVAE paper) than at the zoo's 5e-4? A declared pilot: its rule is written here before any of its runs.

The zoo trains every dSprites recipe with Adam at 5e-4 (the public PyTorch implementation's default), except AnnealedVAE,
whose own pilot showed four seeds of five collapsing at 5e-4 and none at 1e-4 (`benchmarks/annealed_collapse.json`).
At 5e-4 the β-VAE (β = 4) reaches a seed mean of MIG 0.058-0.075 from 10,000 to 60,000 steps, below the 0.20 of a
long-trained public model. This pilot asks, one recipe at a time, whether the smaller learning rate changes that.

**The pilot's rule, declared before it ran.** For a recipe R, seeds 0, 1 and 2 train at the pilot's learning rate
(default 1e-4) to 30,000 steps, with every other setting of the recipe (batch 64, network, initial weights, precision of
the recipe's curve); MIG is measured on the curve's choosing images (factors drawn with seed 2026, 10,000 images) at
5,000, 10,000, 20,000 and 30,000 steps. The other arm is the recipe at its own learning rate: the rows of the zoo's curve
of R for the same seeds and lengths, else the same seeds trained here at that rate. With d_s the difference of the two
MIGs of seed s at 30,000 steps, the pilot's learning rate replaces the recipe's when the mean of d is at least 0.02 and
larger than t(0.95, n - 1) standard errors of d (a one-sided paired t-test at 5 %, n = 3 seeds). Anything else leaves
the recipe as it is. No other length, metric or image set enters the decision; the other rows are for the figure.
Declared for, in this order: beta_vae_b4, factor_vae, dip_vae_i (each decided on its own). When the rule adopts the
rate, the recipe's record at its former rate moves to `benchmarks/curves/zoo/pilots/` and its curves begin again.

    python3 benchmarks/pilot_learning_rate.py --recipe beta_vae_b4            # train what is missing, then decide
    python3 benchmarks/pilot_learning_rate.py --recipe beta_vae_b4 --read     # decide on the rows recorded, train nothing

About 15 minutes a seed on a 2-core Xeon with native bf16 (about twice that on an older CPU). A run cut short goes on
from its last checkpoint (every 2,000 steps) when this machine still has it; the rows it measured stay in the record.
Writes `benchmarks/curves/zoo/pilots/<recipe>-lr<lr>.json` (rows, the rule, the decision) and a figure beside it (every
seed's MIG at both learning rates); runs go to `results/pilots/<recipe>-lr<lr>/seed<k>` (lr written as 1e-4).
"""
from __future__ import annotations
import argparse, json, math, platform, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SEEDS, LENGTHS, MIN_GAIN, ALPHA = (0, 1, 2), (5000, 10_000, 20_000, 30_000), 0.02, 0.05
PILOTS = ROOT / "benchmarks" / "curves" / "zoo" / "pilots"
RULE = __doc__.split("**The pilot's rule, declared before it ran.** ")[1].split("\n\n")[0].replace("\n", " ")


def lr_name(lr: float) -> str: return f"{lr:.0e}".replace("e-0", "e-")          # 1e-4, 5e-4 (the pilots' file names)


def record_file(recipe: str, lr: float) -> Path: return PILOTS / f"{recipe}-lr{lr_name(lr)}.json"


def read_record(recipe: str, lr: float) -> dict:
    f = record_file(recipe, lr)
    return json.loads(f.read_text()) if f.is_file() else dict(recipe=recipe, lr=lr, seeds={})


def write_record(rec: dict) -> None:
    f = record_file(rec["recipe"], rec["lr"]); f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp"); tmp.write_text(json.dumps(rec, indent=1) + "\n"); tmp.replace(f)


def train_arm(name: str, lr: float, seeds, say=print) -> dict:
    """Seeds `seeds` of zoo recipe `name` at learning rate `lr`, measured at `LENGTHS` (the rows missing from the record
    only); returns the record."""
    import torch
    from disentbook.campaign import zoo
    from disentbook.campaign.ledger import CPU_PRECISION
    from disentbook.core import cpu_name
    from disentbook.jobs import train_job
    from disentbook.training.checkpoints import load_model, read_checkpoint_config
    r, s = zoo.recipe(name), zoo.recipe_settings(zoo.recipe(name))
    rec = read_record(name, lr)
    rec.update(method=r.method, params=r.params, settings={**s, "lr": lr}, model=r.model, rule=RULE,
               images=dict(choose=zoo.CURVE_IMAGES, check=zoo.CHECK_IMAGES, num_points=zoo.NUM_POINTS))
    for seed in seeds:
        rows = {x["steps"]: x for x in rec["seeds"].get(str(seed), [])}
        run = ROOT / "results" / "pilots" / f"{name}-lr{lr_name(lr)}" / f"seed{seed}"
        missing = [L for L in LENGTHS if L not in rows]
        if not missing: continue
        ck = run / "checkpoint" / "config.json"
        at = read_checkpoint_config(run / "checkpoint")["step"] if ck.is_file() else 0
        if at > missing[0] or (rows and at < max(rows)):   # past a length it never measured, or not the run of its rows
            if rows:
                say(f"{name} lr {lr:g} seed {seed}: its rows belong to another run (set aside); trained again from its seed")
                rec.setdefault("set_aside", {}).setdefault(str(seed), []).extend(rows[k] for k in sorted(rows))
            rows, at = {}, 0
        for L in LENGTHS:
            if L in rows: continue
            t0 = time.monotonic()
            train_job(method=r.method, dataset="dsprites", params=r.params, steps=L, batch_size=None if at else s["batch_size"],
                      lr=None if at else lr, latent_dim=s["latent_dim"], hidden=s["hidden"], out_dir=run, device="cpu",
                      seed=seed, evaluate=False, threads=s["threads"], precision=None if at else CPU_PRECISION,
                      ckpt_every=zoo.CHUNK, resume=at > 0, overwrite=at == 0, channels_last=zoo.CHANNELS_LAST,
                      init=r.model.get("init"))
            secs, at = time.monotonic() - t0, L
            model = load_model(run / "checkpoint", device="cpu")
            a, b = zoo.measure(model, zoo.CURVE_IMAGES), zoo.measure(model, zoo.CHECK_IMAGES)
            row = dict(steps=L, **a, **{f"check/{k}": v for k, v in b.items() if not k.startswith("kl/")},
                       **zoo.losses(run, L), train_seconds=round(secs, 1), machine=cpu_name(),
                       precision=read_checkpoint_config(run / "checkpoint").get("precision"), threads=torch.get_num_threads())
            rows[L] = row
            rec["seeds"][str(seed)] = [rows[k] for k in sorted(rows)]
            write_record(rec)
            say(f"{name} lr {lr:g} seed {seed} at {L:,} steps: MIG {row['mig']:.4f} (other images {row['check/mig']:.4f}), "
                f"recon {row.get('loss/recon', row.get('loss/rec', float('nan'))):.1f} ({secs:.0f} s)")
    return rec


def arm_rows(name: str, lr: float) -> dict:
    """{seed: {steps: MIG on the choosing images}} of recipe `name` at `lr`: the zoo's curve when it trained at `lr`, with
    the pilot's own record of that rate filling what the curve lacks."""
    from disentbook.campaign import zoo
    out = {}
    f = ROOT / zoo.CURVES / f"{name}.json"
    if f.is_file() and (c := json.loads(f.read_text())).get("settings", {}).get("lr") == lr:
        for sd, rows in c["seeds"].items(): out[int(sd)] = {x["steps"]: x["mig"] for x in rows}
    for sd, rows in read_record(name, lr)["seeds"].items():
        for x in rows: out.setdefault(int(sd), {}).setdefault(x["steps"], x["mig"])
    return out


def decide(new: dict, old: dict, L: int = LENGTHS[-1]) -> dict:
    "The declared rule on {seed: {steps: mig}} of the two arms; `adopt` None while a seed lacks its row at `L`."
    from scipy import stats
    have = [s for s in SEEDS if L in new.get(s, {}) and L in old.get(s, {})]
    out = dict(length=L, seeds=have, min_gain=MIN_GAIN, alpha=ALPHA)
    if len(have) < len(SEEDS): return dict(out, adopt=None, why=f"seeds {sorted(set(SEEDS) - set(have))} lack a row at {L:,} steps")
    d = np.array([new[s][L] - old[s][L] for s in have])
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    t = float(stats.t.ppf(1 - ALPHA, len(d) - 1))
    adopt = bool(d.mean() >= MIN_GAIN and d.mean() > t * se)
    return dict(out, differences=[float(v) for v in d], mean=float(d.mean()), se=se, t=t, adopt=adopt,
                why=f"mean difference {d.mean():+.4f} (needs at least {MIN_GAIN} and more than {t:.2f} x {se:.4f})")


def figure(name: str, arms: dict, out: Path) -> None:
    from disentbook.eval.viz import new_figure, save_figure
    fig = new_figure((5.6, 3.4)); ax = fig.add_subplot()
    for i, (lr, rows) in enumerate(sorted(arms.items(), reverse=True)):
        for k, s in enumerate(SEEDS):
            pts = sorted((L, m) for L, m in rows.get(s, {}).items() if L <= LENGTHS[-1])
            if pts: ax.plot(*zip(*pts), "o-", color=f"C{i}", ms=3, lw=1, alpha=0.8, label=f"Adam {lr:g}" if k == 0 else None)
    ax.set_xlabel("training steps"); ax.set_ylabel("MIG (choosing images)"); ax.grid(alpha=0.3); ax.legend(fontsize=7)
    ax.set_title(f"{name} on dSprites: seeds {', '.join(map(str, SEEDS))} at two learning rates", fontsize=9)
    save_figure(fig, out)


def main(argv=None) -> None:
    from disentbook.campaign import zoo
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", required=True, choices=sorted(zoo.RECIPES))
    ap.add_argument("--lr", type=float, default=1e-4, help="the pilot's learning rate (default 1e-4)")
    ap.add_argument("--read", action="store_true", help="decide on the rows recorded; train nothing")
    a = ap.parse_args(argv)
    base = zoo.recipe_settings(zoo.recipe(a.recipe))["lr"]
    if a.lr == base: ap.error(f"{a.recipe} already trains at {base:g}")
    if not a.read:
        old = arm_rows(a.recipe, base)
        missing = [s for s in SEEDS if not all(L in old.get(s, {}) for L in LENGTHS)]
        if missing: train_arm(a.recipe, base, missing)
        train_arm(a.recipe, a.lr, SEEDS)
    new, old = arm_rows(a.recipe, a.lr), arm_rows(a.recipe, base)
    rec = read_record(a.recipe, a.lr)
    from disentbook.core import cpu_name
    rec.update(rule=RULE, against=dict(lr=base, mig={str(s): {str(L): v for L, v in sorted(r.items()) if L in LENGTHS}
                                                      for s, r in sorted(old.items()) if s in SEEDS}),
               decision=decide(new, old), machine=cpu_name(), python=platform.python_version())
    write_record(rec)
    figure(a.recipe, {a.lr: new, base: old}, record_file(a.recipe, a.lr).with_suffix(".png"))
    dec = rec["decision"]
    print(f"{a.recipe}: Adam {a.lr:g} against {base:g} at {dec['length']:,} steps: " + (
        "undecided, " + dec["why"] if dec["adopt"] is None else
        ("the rule adopts it: " if dec["adopt"] else "the rule keeps the recipe's learning rate: ") + dec["why"]))


if __name__ == "__main__":
    main()
