"""Learning curves of the papers' headline rows: one run per row (seed 0) at the reproduction's settings, trained in chunks
with a checkpoint after each and measured with the paper's own evaluation at a list of lengths; the metric the headline
claim compares decides how long the `cpu` scale trains (`campaign.choose_length`). Run by tools/campaign.py's
`curves-<paper>` stages; results in `benchmarks/curves/<paper>/<row>.csv` and `<paper>.png`, and, once every headline
row's curve is complete, the `cpu` scale's length in the package (`disentbook/paper_values/cpu_lengths.json`: the longest
length any headline row's curve chose, so that the rows of a comparison train equally long, with each row's measured CPU
seconds per step and per evaluation for `--plan`).

The headline rows are those the package's `cpu` scale trains (`cfg["only"]` of the paper's cpu scale: the rows of the
headline claims); the runs take the `quick` scale's settings, which the `cpu` scale keeps apart from seeds and length. A
curve stops early once flat: when the length `campaign.choose_length` picks has `STOP_AFTER` measured lengths after it,
the longest of them at least half the longest length of the list.

    python3 tools/paper_curves.py dipvae --budget 60m       # the same as `tools/campaign.py --stage curves-dipvae`

An evaluation runs between two chunks on the weights at that length, with the global random state saved before and
restored after it, so the run's weights at each length are those of one straight run of that length.
"""
from __future__ import annotations
import json, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))

# paper: (the headline claim's metric, +1 higher is better / -1 lower, the lengths measured); the table and rows are the
# package's cpu scale's (`headline`), the claims these rows decide the reproduction's own (repro.<paper>)
METRIC = {
    # dipvae: the paper's Z-diff classifier (a linear SVM, C = 0.01, on the raw features), fitted on quick's 300 points,
    # predicts one class on these runs (beta-VAE and DIP-VAE-I scored exactly 39.33 % at every length from 1,000 to 10,000
    # steps, the eval split's share of one factor, while the same features standardised rose 56 -> 63 %): a curve of it
    # cannot show learning, so the length follows the same SVM on standardised features. Fitted on 1,000 points it is not
    # degenerate (benchmarks/bench_zdiff_train_size.py), which the cpu scale does; the claims judge the paper's classifier
    "dipvae": ("zdiff_svm_standardized", +1, (1000, 2500, 5000, 10_000, 15_000, 20_000)),
    "tcwae": ("mig", +1, (1000, 2500, 5000, 10_000, 15_000, 20_000)),
    "contrastive": ("ca_s", +1, (500, 1000, 2500, 5000, 10_000)),
    "refvae": ("avg_mae", -1, (1000, 2500, 5000, 10_000, 15_000)),
    "invariance": ("avg_acc", +1, (500, 1500, 3000, 6000, 10_000)),
    "vae": ("mig", +1, (1000, 2500, 5000, 10_000, 15_000, 20_000)),
}
SETTINGS_SCALE = "quick"      # the scale whose settings the runs take (the cpu scale's, apart from seeds and length)
STOP_AFTER = 2


def headline(paper_name: str) -> tuple[str, tuple]:
    "(table, slugs) of the headline rows: those the paper's `cpu` scale trains."
    import disentbook  # noqa: F401  (registers every paper)
    from disentbook.repro import harness as H
    only = H.PAPERS[paper_name].scales["cpu"]["only"]
    return only["table"], tuple(only["rows"])


def curve_spec(paper_name: str) -> tuple:
    "(table, slugs, metric, sign, lengths, settings scale) of paper `paper_name`'s curves."
    return (*headline(paper_name), *METRIC[paper_name], SETTINGS_SCALE)


# the change of the headline metric that counts as still learning (choose_length's `flat`), in the metric's own units:
# Z-diff and clustering accuracy in percent, MIG and accuracies as fractions, MAE in the style's units
FLAT = dict(dipvae=2.0, tcwae=0.02, contrastive=2.0, refvae=0.005, invariance=0.02, vae=0.02)


def out_dir(paper: str) -> Path:
    import campaign
    return campaign.RESULTS / "paper_curves" / paper


def _setup(paper_name: str, slug: str, steps: int, train: dict | None = None, run: Path | None = None):
    """(trainer, data, run cfg, spec, paper) of one headline row at `steps`, resumed from its checkpoint when there is one;
    `train` overrides training settings (e.g. the batch size of a pilot), `run` the run folder (default: the curve's)."""
    import disentbook  # noqa: F401  (registers every paper)
    import campaign
    from disentbook.core import seed_everything
    from disentbook.repro import harness as H
    from disentbook.train import Trainer
    table_name, _, _, _, _, scale = curve_spec(paper_name)
    paper = H.PAPERS[paper_name]
    cfg = H.scale_config(paper, scale)
    opts = {**H.HARNESS_OPTIONS, **paper.options, "scale": scale}
    table = next(t for t in paper.tables if t.name == table_name)
    spec = next(s for s in table.specs(cfg, opts) if s["slug"] == slug)
    ds = table.dataset_name(opts)
    rc = H.run_cfg(table.run_config(cfg), spec, ds)
    rc = dict(rc, train=dict(rc["train"], **(train or {}), steps=int(steps), ckpt_every=campaign.CHUNK))
    data = H.load_data(paper, ds, rc, 0, opts)
    seed_everything(0)
    model = (paper.model or H.default_model)(spec, data, rc)
    objective = H.build_objective(spec, data, model, rc)
    sampler = H._sampler_fn(paper, data)("cpu")
    run = out_dir(paper_name) / slug / "run" if run is None else Path(run)
    trainer = Trainer(model, objective, sampler, H.train_config(rc, 0, "cpu", data, False, "auto"), out_dir=run)
    if (run / "checkpoint" / "config.json").is_file(): trainer.load(run / "checkpoint")
    return trainer, data, rc, spec, paper


def read_rows(paper: str, slug: str) -> list[dict]:
    f = out_dir(paper) / slug / "curve.jsonl"
    return [json.loads(l) for l in f.read_text().splitlines() if l.strip()] if f.is_file() else []


def row_curve(paper_name: str, slug: str, clock, lengths=None) -> bool:
    "One headline row's curve, measured at each length (resuming what earlier calls did); False when cut by the budget."
    import torch
    import campaign
    lengths = lengths or curve_spec(paper_name)[4]
    rows = read_rows(paper_name, slug)
    todo = [L for L in lengths if L not in {r["steps"] for r in rows}]
    if not todo or stopped_flat(paper_name, rows): return True
    torch.set_num_threads(campaign.THREADS)
    trainer, data, rc, spec, paper = _setup(paper_name, slug, max(lengths))
    for L in todo:
        if stopped_flat(paper_name, read_rows(paper_name, slug)): break
        while trainer.step < L:
            clock.wait_while_paused()
            if not clock.fits(): return False
            n = min(L, (trainer.step // campaign.CHUNK + 1) * campaign.CHUNK) - trainer.step
            t0, c0 = time.monotonic(), time.process_time()
            trainer.fit(n); trainer.save()
            dt = time.monotonic() - t0
            clock.took(dt * campaign.CHUNK / n)
            sec = _seconds(paper_name, slug)
            (out_dir(paper_name) / slug / "seconds.json").write_text(json.dumps(dict(
                seconds=sec["seconds"] + dt, cpu_seconds=sec["cpu_seconds"] + time.process_time() - c0, step=trainer.step)))
            campaign._progress(f"{paper_name}/{slug}", trainer.step, dt, n)
        trainer.save(keep=True)         # kept at every measured length: the cpu reproduction's seed 0 resumes from it
        rng = torch.get_rng_state()
        t0 = time.monotonic()
        try:
            m = paper.evaluate(trainer.model.eval(), data, rc, 0, spec)
        finally:
            torch.set_rng_state(rng); trainer.model.train()
        sec = _seconds(paper_name, slug)
        row = dict(steps=L, **{k: float(v) for k, v in m.items() if isinstance(v, (int, float)) and np.isfinite(v)},
                   precision=trainer.precision, train_seconds=round(sec["seconds"], 1),
                   train_cpu_seconds=round(sec["cpu_seconds"], 1), seconds_eval=round(time.monotonic() - t0, 1))
        with open(out_dir(paper_name) / slug / "curve.jsonl", "a") as f: f.write(json.dumps(row) + "\n")
        print(f"{paper_name}/{slug} at {L:,} steps: {curve_spec(paper_name)[2]} {row.get(curve_spec(paper_name)[2], float('nan')):.4g}",
              flush=True)
        write_files(paper_name)
    return True


def kept_checkpoint(paper: str, slug: str, steps: int) -> Path | None:
    "The curve run of headline row `slug` at exactly `steps` (kept when it was measured there), or None."
    p = out_dir(paper) / slug / "run" / f"step_{int(steps):07d}"
    return p if (p / "config.json").is_file() else None


def _seconds(paper: str, slug: str) -> dict:
    f = out_dir(paper) / slug / "seconds.json"
    return json.loads(f.read_text()) if f.is_file() else dict(seconds=0.0, cpu_seconds=0.0)


def write_files(paper_name: str):
    "benchmarks/curves/<paper>/<row>.csv for each row measured, and <paper>.png: the headline metric along each run."
    import pandas as pd
    import campaign
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _, slugs, key, sign, _, _ = curve_spec(paper_name)
    dest = campaign.CURVES / paper_name
    dest.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for slug in slugs:
        rows = read_rows(paper_name, slug)
        if not rows: continue
        df = pd.DataFrame(rows).sort_values("steps")
        df.to_csv(dest / f"{slug}.csv", index=False, float_format="%.5g")
        if key in df: ax.plot(df["steps"], df[key], "o-", label=slug)
    ax.set_xlabel("training steps"); ax.set_ylabel(key + ("" if sign > 0 else " (lower is better)"))
    ax.set_title(f"{paper_name}: {key} along one run per headline row (seed 0)", fontsize=9)
    ax.legend(fontsize=7); ax.grid(alpha=.3); fig.tight_layout()
    fig.savefig(campaign.CURVES / f"{paper_name}.png", dpi=90); plt.close(fig)


def lengths(paper_name: str) -> dict:
    "{slug: (steps, why)} chosen from the measured curves by `campaign.choose_length` on the headline metric."
    import campaign
    _, slugs, key, sign, _, _ = curve_spec(paper_name)
    out = {}
    for slug in slugs:
        rows = [dict(r, _score=sign * r[key]) for r in read_rows(paper_name, slug) if key in r]
        if rows:
            L, why = campaign.choose_length(rows, key="_score", flat=FLAT[paper_name])
            out[slug] = (L, why.replace("_score", key if sign > 0 else f"-{key}"))
    return out


def _scored(paper_name: str, rows: list[dict]) -> list[dict]:
    _, _, key, sign, _, _ = curve_spec(paper_name)
    return [dict(r, _score=sign * r[key]) for r in rows if key in r]


def stopped_flat(paper_name: str, rows: list[dict]) -> bool:
    "Whether a row's curve has stopped by the early-stop rule (`STOP_AFTER` measured lengths after the one chosen)."
    import campaign
    sc = _scored(paper_name, rows)
    if not sc or max(r["steps"] for r in sc) < max(curve_spec(paper_name)[4]) // 2: return False    # never before half
    L, _ = campaign.choose_length(sc, key="_score", flat=FLAT[paper_name])
    return sum(r["steps"] > L for r in sc) >= STOP_AFTER


def lengths_file() -> Path:
    "The package's cpu lengths file (`repro.declare.curve_lengths_path`, looked up at each call)."
    from disentbook.repro import declare
    return declare.curve_lengths_path()


def write_cpu_lengths(paper_name: str) -> dict:
    """The cpu scale's length of `paper_name` into the package (`disentbook/paper_values/cpu_lengths.json`): the longest
    length any headline row's curve chose, each row's own length and why, and its measured seconds per training step and
    per evaluation on this CPU (what `disentbook reproduce NAME --scale cpu --plan` multiplies)."""
    import campaign
    table, slugs, key, sign, _, _ = curve_spec(paper_name)
    chosen, rows = lengths(paper_name), {}
    for slug in slugs:
        rr = sorted(read_rows(paper_name, slug), key=lambda r: r["steps"])
        last = rr[-1]
        rows[slug] = dict(steps=chosen[slug][0], why=chosen[slug][1],
                          # wall seconds, or CPU seconds over the threads where a pause made the wall time longer
                          seconds_per_step=round(min(last["train_seconds"], last["train_cpu_seconds"] / campaign.THREADS) / last["steps"], 5),
                          seconds_per_eval=round(float(np.mean([r["seconds_eval"] for r in rr])), 1),
                          precision=last.get("precision"))
    entry = dict(steps=max(r["steps"] for r in rows.values()), table=table, metric=key,
                 higher_is_better=sign > 0, flat=FLAT[paper_name], rows=rows, curves=f"benchmarks/curves/{paper_name}/",
                 machine=dict(campaign.machine(), threads=campaign.THREADS))
    f = lengths_file()
    d = json.loads(f.read_text()) if f.is_file() else {}
    d[paper_name] = entry
    f.write_text(json.dumps(dict(sorted(d.items())), indent=1) + "\n")
    return entry


def stage(paper_name: str, clock) -> str:
    for slug in curve_spec(paper_name)[1]:
        if not row_curve(paper_name, slug, clock): return "partial"
    e = write_cpu_lengths(paper_name)
    each = ", ".join(f"{s} {r['steps']:,}" for s, r in e["rows"].items())
    print(f"{paper_name}: the cpu scale trains {e['steps']:,} steps ({each})", flush=True)
    return "ok"


if __name__ == "__main__":
    import argparse, campaign
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("paper", choices=list(METRIC)); p.add_argument("--budget", default="60m")
    a = p.parse_args()
    print(stage(a.paper, campaign.Clock(campaign.parse_budget(a.budget))))
