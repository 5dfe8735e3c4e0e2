"""The `dsprites-seeds` stage of the campaign (tools/campaign.py), and the second set of fresh images every shipped dSprites
model is measured on.

The recipes of `dsprites_curves.SEED_RECIPES` train again with `EXTRA_SEEDS` to the length seed 0's curve chose, each
measured along its run as seed 0 was (its own curve, `benchmarks/curves/NAME-hW-seedK.csv`); the seed with the highest MIG
at that length on the curves' images ships. Length and seed were both chosen on those images, so every seed's run, and
every shipped model, is measured again on `CHECK_SEED`'s 10,000 other fresh images, which chose nothing: the number a
card quotes. The choice and every seed's numbers: `benchmarks/curves/seeds.json`.
"""
from __future__ import annotations
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))
import campaign as C  # noqa: E402  (folders, clock; tests patch them there)
import dsprites_curves as D  # noqa: E402  (the recipes' runs, curves and measurement; tests patch its settings there)


def selection_rule() -> str:
    return ("the highest MIG at that length on the learning curves' 10,000 images, among seeds "
            + ", ".join(str(s) for s in (D.SETTINGS["seed"], *D.EXTRA_SEEDS)))


def seeds_file() -> Path: return C.CURVES / "seeds.json"    # each seeded recipe: its seeds' MIG on both image sets, the choice


def read_seeds() -> dict:
    f = seeds_file()
    return json.loads(f.read_text()) if f.is_file() else {}


def check_mig(name: str, seed: int, steps: int) -> dict:
    "MIG, FactorVAE score and active latents of recipe `name`'s run of `seed` at `steps` on CHECK_SEED's 10,000 fresh images."
    from disentbook.train import load_model
    m = D.measure_dsprites(load_model(D.curve_dir(name, seed) / f"step_{steps}" / "checkpoint", device="cpu"), seed=D.CHECK_SEED)
    return dict(mig=round(m["mig"], 5), factor_vae=round(m["factor_vae"], 5), active=m["active"])


def chosen_seed(name: str, steps: int) -> tuple[int, dict | None]:
    "(seed to ship, its selection record) of recipe `name` at `steps`: seeds.json's choice at that length, else SETTINGS' seed."
    sel = read_seeds().get(name)
    return (int(sel["chosen"]), sel) if sel and sel["steps"] == steps else (D.SETTINGS["seed"], None)


def selection_sentence(name: str, sel: dict) -> str:
    "How the shipped seed was chosen, with every seed's MIG on both image sets."
    per = "; ".join(f"seed {k}: {v['mig']:.3f} / {v['check']['mig']:.3f}" for k, v in sel["seeds"].items())
    return (f"seed {sel['chosen']} ships, chosen by {sel['rule']} (MIG on the curves' images / on 10,000 other fresh images "
            f"drawn with seed {D.CHECK_SEED}: {per}); the number to quote is the second, which chose nothing")


def stage_seeds(clock: C.Clock, names=None) -> str:
    """`SEED_RECIPES` trained again with `EXTRA_SEEDS` (dsprites_curves) to the length seed 0's curve chose, each measured
    along its run as seed 0 was (its own curve); every seed's run at that length measured again on CHECK_SEED's images; the choice
    (`selection_rule`) in benchmarks/curves/seeds.json; then the recipes packaged again (`stage_models`)."""
    names = [n for n in D._names(names) if n in D.SEED_RECIPES]
    sel = read_seeds()
    for n in names:
        rows0 = D.read_curve(n)
        if not D.curve_done(rows0):
            print(f"{n}: its seed-0 curve is not complete; run dsprites-curves first"); return "partial"
        L, _ = C.choose_length(rows0)
        for s in D.EXTRA_SEEDS:
            if not D.run_curve(n, clock, [x for x in D.LENGTHS if x <= L], seed=s, stop=False): return "partial"
        old = sel.get(n) if (sel.get(n) or {}).get("steps") == L else {}
        seeds = {}
        for s in (D.SETTINGS["seed"], *D.EXTRA_SEEDS):
            clock.wait_while_paused()
            row = next(r for r in D.read_curve(n, s) if r["steps"] == L)
            check = (old or {}).get("seeds", {}).get(str(s), {}).get("check") or check_mig(n, s, L)
            seeds[str(s)] = dict(mig=round(row["mig"], 5), factor_vae=round(row["factor_vae"], 5), active=row["active"], check=check)
        chosen = max(seeds, key=lambda k: seeds[k]["mig"])
        sel[n] = dict(steps=L, rule=selection_rule(), check_images=f"10,000 fresh images drawn with seed {D.CHECK_SEED}",
                      chosen=int(chosen), seeds=seeds)
        C.CURVES.mkdir(parents=True, exist_ok=True)
        seeds_file().write_text(json.dumps(sel, indent=1) + "\n")
        print(f"{n} at {L:,} steps: {selection_sentence(n, sel[n])}", flush=True)
    models = D.stage_models(clock)
    return models if set(D.SEED_RECIPES) <= set(names) else "partial"


def check_shipped(name: str, dest: Path, lengths: dict):
    "A shipped model kept as it was: its fp16 weights measured on CHECK_SEED's images, into lengths.json and its card."
    from disentbook.classroom.pretrained import pretrained
    m = D.measure_dsprites(pretrained(name, root=dest), seed=D.CHECK_SEED)
    lengths[name].update(mig_check=round(m["mig"], 5), factor_vae_check=round(m["factor_vae"], 5))
    D.lengths_file().write_text(json.dumps(lengths, indent=1) + "\n")
    f = Path(dest) / f"{name}.json"
    card = json.loads(f.read_text())
    card["check"] = dict(mig=lengths[name]["mig_check"], factor_vae=lengths[name]["factor_vae_check"], weights="the shipped fp16 weights",
                         images=f"10,000 fresh dSprites images drawn with seed {D.CHECK_SEED}, other than the curve's")
    f.write_text(json.dumps(card, indent=1) + "\n")
