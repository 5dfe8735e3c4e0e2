"""The dSprites stages of the campaign (tools/campaign.py): the learning curves of the seven dSprites models the package
ships (`dsprites-curves`) and the models packaged at the lengths their curves chose (`dsprites-models`).

Each recipe of tools/train_pretrained.py trains once to 20,000 steps at `SETTINGS` in chunks of `campaign.CHUNK` steps
(a checkpoint after each), measured at every length of `LENGTHS` by `measure_dsprites` (MIG on 10,000 fresh images with
each factor's best latent and gap, the FactorVAE score, the KL of each latent); `campaign.choose_length` picks the length.
"""
from __future__ import annotations
import csv, json, shutil, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))
import campaign as C  # noqa: E402  (the folders, chunk, clock and length rule; tests patch them there)

DSPRITES = ("factor_vae", "tcwae_mws", "dip_vae_i", "beta_tcvae", "beta_vae_b4", "dip_vae_ii", "beta_vae_b1")
LENGTHS = (1000, 2500, 5000, 7500, 10_000, 15_000, 20_000)       # where each curve is measured
# the dSprites recipes' training settings (method and weights: train_pretrained.RECIPES); the length comes from the curve
# hidden 256: the FC width of the encoder and decoder (the CLI's default and disentanglement_lib's). The first curves ran at
# 128 to keep the shipped files small and no recipe's MIG rose above 0.12 in 20,000 steps; a pilot of beta_tcvae at 256
# (seed 0, bf16, the same settings otherwise) measured MIG 0.196 at 2,500 steps where 128 had measured 0.021
SETTINGS = dict(batch_size=64, lr=5e-4, hidden=256, latent_dim=10, threads=2, precision="auto", seed=0)
EVAL = dict(num_points=10_000, seed=2026, fvae=dict(batch_size=64, num_train=500, num_eval=300, num_variance_estimate=5000))
KL_ACTIVE = 0.01     # nats: a latent whose mean KL is below this carries nothing (collapsed)
# a curve stops early once flat: when the length `campaign.choose_length` picks from the lengths measured so far has
# STOP_AFTER longer lengths measured after it (none of which improved MIG by campaign.FLAT), the longer lengths are not
# trained (declared with the rule, before the hidden-256 curves were measured)
STOP_AFTER = 2
# ... and never before half the longest length: MIG can rise late (the hidden-128 dip_vae_i curve: 0.072-0.085 up to
# 7,500 steps, 0.111 at 20,000). Added after the hidden-256 dip_vae_i curve had stopped at 5,000 steps (MIG 0.016-0.028)
def stop_from() -> int: return max(LENGTHS) // 2
# seeds: the recipes whose seed-0 curves measured the highest MIG train again with EXTRA_SEEDS to the length seed 0's curve
# chose (`dsprites-seeds`); the seed whose MIG at that length is highest on the curves' images (EVAL) ships, and the number
# a card states for it is measured on CHECK_SEED's 10,000 other fresh images, which chose nothing (declared before the
# seeds ran: choosing on the same images would inflate the number by the choice)
SEED_RECIPES = ("beta_tcvae", "factor_vae")              # (the stage: tools/dsprites_seeds.py)
EXTRA_SEEDS = (1, 2, 3, 4)
CHECK_SEED = 2027


# ---------------------------------------------------------------- measurement along a run
def measure_dsprites(model, num_points: int | None = None, seed: int | None = None) -> dict:
    """A dSprites model's disentanglement on `num_points` fresh images (factors drawn by `seed`): the package's
    `disentbook.campaign.zoo.measure` (MIG with each factor's best latent and gap, FactorVAE score, KL per latent)."""
    from disentbook.campaign.zoo import measure
    return measure(model, EVAL["seed"] if seed is None else seed, num_points or EVAL["num_points"], EVAL["fvae"])


# ---------------------------------------------------------------- the curves stage
def _recipe(name: str) -> tuple[str, dict]:
    from train_pretrained import RECIPES
    method, dataset, params, _, _ = RECIPES[name]
    if dataset != "dsprites": raise C.CampaignError(f"{name} is not a dSprites recipe")
    return method, params


def _tag(seed) -> str:
    "'' for the curves' own seed (SETTINGS), '-seedK' for another seed's run of the same recipe."
    return "" if seed is None or int(seed) == SETTINGS["seed"] else f"-seed{int(seed)}"


def curve_dir(name: str, seed: int | None = None) -> Path: return C.RESULTS / "curves" / f"{name}{_tag(seed)}"


def read_curve(name: str, seed: int | None = None) -> list[dict]:
    f = curve_dir(name, seed) / "curve.jsonl"
    if not f.is_file(): return []
    return [json.loads(l) for l in f.read_text().splitlines() if l.strip()]


def _at(run: Path) -> int:
    from disentbook.train import read_checkpoint_config
    return read_checkpoint_config(run / "checkpoint")["step"] if (run / "checkpoint" / "config.json").is_file() else 0


def _losses(run: Path, steps: int) -> dict:
    "The loss terms of the history rows of the last 500 steps up to `steps` (mean)."
    import pandas as pd
    h = pd.read_csv(run / "history.csv")
    h = h[(h["step"] <= steps) & (h["step"] > steps - 500)]
    return {f"loss/{c}": float(h[c].mean()) for c in h.columns if c != "step"}


def train_to(name: str, steps: int, clock: C.Clock, seed: int | None = None) -> bool:
    "Train recipe `name`'s curve run (of `seed`, default SETTINGS') up to `steps` in chunks; False when the budget ran out first."
    from disentbook.cli import train_job
    method, params = _recipe(name)
    run, s = curve_dir(name, seed) / "run", SETTINGS
    seed = s["seed"] if seed is None else int(seed)
    while (at := _at(run)) < steps:
        clock.wait_while_paused()
        if not clock.fits(): return False
        target = min(steps, (at // C.CHUNK + 1) * C.CHUNK)
        t0, c0 = time.monotonic(), time.process_time()
        train_job(method=method, dataset="dsprites", params=params, steps=target,
                  batch_size=None if at else s["batch_size"], lr=None if at else s["lr"], latent_dim=s["latent_dim"],
                  hidden=s["hidden"], out_dir=run, device="cpu", seed=seed, evaluate=False, threads=s["threads"],
                  precision=None if at else s["precision"], ckpt_every=C.CHUNK, resume=at > 0, overwrite=at == 0)
        dt, cpu = time.monotonic() - t0, time.process_time() - c0
        clock.took(dt * C.CHUNK / max(target - at, 1))
        # training seconds of the run so far (chunks, data building included): wall (a paused campaign's wall time
        # includes the pause) and CPU seconds of all threads (which a pause does not inflate)
        f, prev = curve_dir(name, seed) / "seconds.json", _seconds(curve_dir(name, seed))
        f.write_text(json.dumps(dict(seconds=prev["seconds"] + dt, cpu_seconds=prev.get("cpu_seconds", 0.0) + cpu, step=target)))
        C._progress(f"{name}{_tag(seed)}", target, time.monotonic() - t0, target - at)
    return True


def stopped_flat(rows: list[dict]) -> bool:
    """Whether a curve has stopped by the early-stop rule: `STOP_AFTER` measured lengths after the one choose_length picks,
    the longest at least `stop_from()`."""
    if not rows or max(r["steps"] for r in rows) < stop_from(): return False
    L, _ = C.choose_length(rows)
    return sum(r["steps"] > L for r in rows) >= STOP_AFTER


def curve_done(rows: list[dict]) -> bool:
    "A curve is complete: measured at the longest length, or stopped flat."
    return bool(rows) and (max(r["steps"] for r in rows) >= max(LENGTHS) or stopped_flat(rows))


def run_curve(name: str, clock: C.Clock, lengths=None, seed: int | None = None, stop: bool = True) -> bool:
    """Recipe `name`'s learning curve (of `seed`, default SETTINGS'), measured at each of `lengths` (resuming what earlier
    calls did) until it has stopped flat (`stopped_flat`; `stop=False`: every length); False if cut short."""
    from disentbook.train import load_model, read_checkpoint_config
    rows, out, lengths = read_curve(name, seed), curve_dir(name, seed), lengths or LENGTHS
    done, measured = {r["steps"] for r in rows}, False
    for L in lengths:
        if stop and stopped_flat(rows): break
        if L in done or L < _at(out / "run"): continue     # measured, or passed by a run started with other lengths
        if not train_to(name, L, clock, seed): return False
        model = load_model(out / "run" / "checkpoint", device="cpu")
        t0 = time.monotonic()
        row = dict(steps=L, **measure_dsprites(model), **_losses(out / "run", L))
        cfg = read_checkpoint_config(out / "run" / "checkpoint")
        row["seconds_eval"] = round(time.monotonic() - t0, 1)
        keep = out / f"step_{L}"                          # the checkpoint at each measured length (packaging reads it)
        shutil.rmtree(keep, ignore_errors=True); shutil.copytree(out / "run" / "checkpoint", keep / "checkpoint")
        run_info = json.loads((out / "run" / "run.json").read_text())
        row["precision"] = run_info.get("precision")
        row["hidden"], row["batch_size"], row["lr"] = cfg["model"].get("hidden"), cfg["train"]["batch_size"], cfg["train"]["lr"]
        sec = _seconds(out)
        row["train_seconds"], row["train_cpu_seconds"] = round(sec["seconds"], 1), round(sec.get("cpu_seconds", float("nan")), 1)
        assert cfg["step"] == L
        with open(out / "curve.jsonl", "a") as f: f.write(json.dumps(row) + "\n")
        rows.append(row); measured = True
        print(f"{name}{_tag(seed)} at {L:,} steps: MIG {row['mig']:.3f}, FactorVAE {row['factor_vae']:.3f}, active "
              f"{row['active']} ({row['seconds_eval']:.0f} s to measure)", flush=True)
        write_curve_files(name, seed)
    if rows and not measured: write_curve_files(name, seed)   # a curve resumed from elsewhere (a pilot), already flat
    return True


def _seconds(out: Path) -> dict:
    "Training wall and CPU seconds so far, from the chunk log the campaign keeps beside the run."
    f = out / "seconds.json"
    return json.loads(f.read_text()) if f.is_file() else dict(seconds=0.0, cpu_seconds=0.0)


def curve_stem(name: str, hidden: int | None = None, seed: int | None = None) -> str:
    """The file stem of recipe `name`'s curve in benchmarks/curves/: NAME for the first curves (FC width 128), NAME-hW for
    a curve at another width W, so that a shipped model's card keeps pointing at the curve its own width gave; -seedK
    after it for another seed's run."""
    hidden = SETTINGS["hidden"] if hidden is None else int(hidden)
    return (name if hidden == 128 else f"{name}-h{hidden}") + _tag(seed)


def write_curve_files(name: str, seed: int | None = None):
    "benchmarks/curves/STEM.csv and STEM.png (`curve_stem`) from the measured rows."
    import pandas as pd
    rows = read_curve(name, seed)
    if not rows: return
    stem = curve_stem(name, seed=seed)
    C.CURVES.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows).sort_values("steps")
    df.to_csv(C.CURVES / f"{stem}.csv", index=False, float_format="%.5g")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].plot(df["steps"], df["mig"], "o-", label="MIG", lw=2)
    ax[0].plot(df["steps"], df["factor_vae"], "s--", label="FactorVAE score")
    for fac in ("scale", "posX", "posY"):
        ax[0].plot(df["steps"], df[f"gap/{fac}"], ":", label=f"gap of {fac}")
    ax[0].set_xlabel("training steps (batch 64)"); ax[0].set_ylim(0, 1); ax[0].legend(fontsize=7); ax[0].grid(alpha=.3)
    ax[0].set_title(f"{name}{_tag(seed)} (FC width {SETTINGS['hidden']}): disentanglement along the run (10,000 fresh images)",
                    fontsize=9)
    rec = [c for c in df.columns if c in ("loss/recon", "loss/nll", "loss/rec")]
    for c in rec + [c for c in df.columns if c.startswith("loss/") and c not in rec and c != "loss/loss"][:3]:
        ax[1].plot(df["steps"], df[c], "o-", label=c.split("/")[1])
    ax[1].set_yscale("symlog"); ax[1].set_xlabel("training steps"); ax[1].legend(fontsize=7); ax[1].grid(alpha=.3)
    ax[1].set_title("loss terms (mean of the last 500 steps)", fontsize=9)
    fig.tight_layout(); fig.savefig(C.CURVES / f"{stem}.png", dpi=90); plt.close(fig)


ONLY: tuple = ()      # `tools/campaign.py --recipes a,b`: these recipes only, in that order (the stage then ends 'partial' at best)


def _pilots() -> dict:
    "The piloted recipes (measured, not shipped): `train_pretrained.PILOTS`."
    import train_pretrained as TP
    return TP.PILOTS


def _names(names) -> tuple:
    return tuple(names) if names is not None else (tuple(n for n in ONLY if n in (*DSPRITES, *_pilots())) if ONLY else DSPRITES)


def stage_curves(clock: C.Clock, names=None) -> str:
    names = _names(names)
    for n in names:
        if not run_curve(n, clock): return "partial"
    return "ok" if set(DSPRITES) <= set(names) else "partial"


# ---------------------------------------------------------------- the models stage
def lengths_file() -> Path: return C.CURVES / "lengths.json"   # each recipe's chosen length (train_pretrained reads it)


def traversal_figure_by_factor(model, row: dict, title: str, n_steps: int = 9, span: float = 2.5):
    "Each factor's most informative latent traversed on one fresh image: `disentbook.campaign.models.traversal_figure`."
    from disentbook.campaign.models import traversal_figure
    return traversal_figure(model, row, title, n_steps, span)


def stage_models(clock: C.Clock, names=None) -> str:
    """Each recipe at the length its curve chose, packaged by tools/train_pretrained.py from the curve run's checkpoint at
    that length (bit-identical to a straight run of that length): fp16 weights, card with its curve and figures."""
    names = _names(names)
    import train_pretrained as TP
    import dsprites_seeds as S            # the seed each recipe ships and the second set of images (imported here: it imports this)
    from disentbook.eval.viz import save_figure
    from disentbook.train import load_model
    lengths = json.loads(lengths_file().read_text()) if lengths_file().is_file() else {}
    kept = []
    for n in names:
        rows = read_curve(n)
        if not curve_done(rows):
            print(f"{n}: its curve is not complete ({len(rows)} lengths measured, not yet flat); run dsprites-curves first")
            return "partial"
        L, why = C.choose_length(rows)
        seed, sel = S.chosen_seed(n, L)
        row = next(r for r in read_curve(n, seed) if r["steps"] == L)
        new = dict(steps=L, why=why, seed=seed, mig=row["mig"], factor_vae=row["factor_vae"], active=row["active"],
                   train_seconds=row["train_seconds"], train_cpu_seconds=row.get("train_cpu_seconds"),
                   precision=row["precision"], hidden=row.get("hidden", SETTINGS["hidden"]))
        if sel: new["selection"] = S.selection_sentence(n, sel)
        if not better_than_shipped(new, lengths.get(n)):
            old = lengths[n]
            print(f"{n}: kept as shipped (FC width {old.get('hidden') or 128}, {old['steps']:,} steps, MIG {old['mig']:.3f}): "
                  f"its curve at width {new['hidden']} chose {L:,} steps at MIG {new['mig']:.3f}", flush=True)
            kept.append(n); continue
        clock.wait_while_paused()
        check = sel["seeds"][str(seed)]["check"] if sel else S.check_mig(n, seed, L)
        lengths[n] = dict(new, mig_check=check["mig"], factor_vae_check=check["factor_vae"])
        lengths_file().write_text(json.dumps(lengths, indent=1) + "\n")
    runs = C.RESULTS / "pretrained_runs"
    for n in [n for n in names if n not in kept]:
        clock.wait_while_paused()
        L, seed = lengths[n]["steps"], lengths[n].get("seed", SETTINGS["seed"])
        src = curve_dir(n, seed) / f"step_{L}" / "checkpoint"
        shutil.rmtree(runs / n / "checkpoint", ignore_errors=True); shutil.copytree(src, runs / n / "checkpoint")
        trained = dict(seconds=lengths[n]["train_seconds"], cpu_seconds=lengths[n].get("train_cpu_seconds"), steps=L,
                       from_curve=True)
        TP.package(n, runs, trained, TP.DEFAULT_DEST)
        model = load_model(src, device="cpu")
        row = next(r for r in read_curve(n, seed) if r["steps"] == L)
        C.FIGURES.mkdir(parents=True, exist_ok=True)
        save_figure(traversal_figure_by_factor(model, row, f"{n}{_tag(seed)} at {L:,} steps: each factor's most informative latent"),
                    C.FIGURES / f"{n}_traversals.png")
        shutil.copy(C.CURVES / f"{curve_stem(n, seed=seed)}.png", C.FIGURES / f"{n}_curve.png")
        print(f"{n}: packaged at {L:,} steps, seed {seed} (MIG on the curve's 10,000 images {row['mig']:.3f}, on 10,000 "
              f"other fresh images {lengths[n]['mig_check']:.3f})", flush=True)
    for n in kept:                      # shipped from an earlier curve (its run is gone): its shipped weights measured, once
        if "mig_check" in lengths[n]: continue
        clock.wait_while_paused()
        S.check_shipped(n, TP.DEFAULT_DEST, lengths)
    write_models_page(None, TP.DEFAULT_DEST)
    return "ok" if set(DSPRITES) <= set(names) else "partial"


def better_than_shipped(new: dict, shipped: dict | None) -> bool:
    """Package the curve's choice `new` over the shipped model's record `shipped` (lengths.json) unless the shipped one was
    chosen from a curve at another FC width and measured the higher MIG at its chosen length: each recipe ships at the width
    whose curve gave it the higher MIG (one seed per width, so a choice on the measured curves, not an effect of width)."""
    if not shipped: return True
    same_width = int(shipped.get("hidden") or 128) == int(new.get("hidden") or 128)
    return same_width or float(new["mig"]) >= float(shipped["mig"])


def pilot_lines() -> list[str]:
    "Markdown lines on the piloted recipes (`_pilots()`) whose curves exist: recipe, MIG along the run, why it does not ship."
    import train_pretrained as TP
    L = []
    for n, why in _pilots().items():
        f = C.CURVES / f"{curve_stem(n)}.csv"                 # the committed curve (the runs stay on the machine)
        if not f.is_file(): continue
        rows = sorted(csv.DictReader(f.open()), key=lambda r: int(r["steps"]))
        method, _, params, _, _ = TP.RECIPES[n]
        ps = ", ".join(f"{k} = {v:g}" for k, v in params.items())
        migs = ", ".join(f"{float(r['mig']):.3f} at {int(r['steps']):,}" for r in rows)
        L.append(f"- `{n}` ({method}, {ps}; FC width {SETTINGS['hidden']}): MIG {migs} steps "
                 f"([curve](../../benchmarks/curves/{f.stem}.png)); not shipped: {why}.")
    return (["## Piloted, not shipped", "", "Recipes measured the same way to see whether they beat a shipped one "
             "(one seed each):", "", *L, ""] if L else [])


def write_models_page(names=None, root=None):
    """reports/pretrained/README.md: each shipped dSprites model with a learning curve on its card (`names`: None for
    all of them), its width, length, why, its numbers there (from its card's own curve) and its figures."""
    from disentbook.classroom.pretrained import pretrained_card
    def curved(n):
        try: return "curve" in pretrained_card(n, root)
        except Exception: return False                            # no card there (a partial destination)
    names = [n for n in DSPRITES if curved(n)] if names is None else list(names)
    import dsprites_seeds as S
    seeded = S.read_seeds()
    L = ["# The shipped dSprites models", "",
         "Each model trained with seed 0 (batch 64, lr 5e-4, two CPU threads, the precision and FC width its card names), "
         "measured along the run on 10,000 fresh images at 1,000-20,000 steps (a curve stops early once flat), and shipped "
         "at the length its learning curve chose: the shortest measured length from which no longer run improves MIG by "
         f"{C.FLAT} or more (`tools/campaign.py`). The length (and, for a recipe trained with several seeds, the seed) was "
         f"chosen on those images, so each model is measured again on 10,000 other fresh images (drawn with seed "
         f"{CHECK_SEED}) that chose nothing: the MIG to quote"
         + (f". {', '.join(f'`{n}`' for n in seeded)} also trained with seeds {', '.join(map(str, EXTRA_SEEDS))} to that "
            "length (the `dsprites-seeds` stage); the seed that ships is the one with the highest MIG on the curves' images "
            "(every seed's numbers below)" if seeded else "")
         + ". Regenerated by the campaign's `dsprites-models` stage.", "",
         "| model | FC width | steps | seed | MIG, other images | MIG, curve's images | FactorVAE score | gap of scale / x / y | "
         "active latents | curve | traversals |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        c = pretrained_card(n, root)
        r = next(r for r in c["curve"] if r["steps"] == c["train"]["steps"])
        gaps = " / ".join(f"{r[f'gap/{f}']:.2f}" for f in ("scale", "posX", "posY"))
        other = f"{c['check']['mig']:.3f}" if "check" in c else "not measured"
        L.append(f"| `{n}` | {c['model']['hidden']} | {r['steps']:,} | {c['train'].get('seed', 0)} | {other} | {r['mig']:.3f} | "
                 f"{r['factor_vae']:.3f} | {gaps} | {r['active']} | [curve]({n}_curve.png) | [traversals]({n}_traversals.png) |")
    L += ["", "Why each length: " + " ".join(f"`{n}`: {pretrained_card(n, root)['length']}." for n in names), ""]
    for n, sel in seeded.items():
        L += [f"Seeds of `{n}` at {sel['steps']:,} steps (MIG on the curves' images / on the other images): "
              + "; ".join(f"seed {k} {v['mig']:.3f} / {v['check']['mig']:.3f}" for k, v in sel["seeds"].items())
              + f"; seed {sel['chosen']} ships.", ""]
    L += pilot_lines()
    C.FIGURES.mkdir(parents=True, exist_ok=True)
    (C.FIGURES / "README.md").write_text("\n".join(L))


