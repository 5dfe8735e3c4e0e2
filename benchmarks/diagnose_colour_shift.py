"""Where is the colour shift lost? The Colored-MNIST models of the invariance paper, against every background colour.

Every row of the invariance reproduction's Table 1 classifies the training backgrounds (red, green, blue) near
perfectly, keeps about 0.97 on the unseen cyan and falls to 0.1-0.5 on the unseen yellow and magenta: the worst-group
accuracy sits at the floor and the headline claims cannot be judged on models that classify every test group. The
paper does not give its palette (the reproduction takes the spec's default). This script measures what the trained
classifiers read, on the `cpu` scale's model and data (`quick`'s settings, fp32, the reproduction's own evaluation
classifier: a logistic regression on the frozen code of fresh training images): the accuracy of each run on the test
digits drawn on every background of a grid (red, green and blue each at 0.1, 0.3, 0.5, 0.7, 0.9: 125 colours, every
digit colour, the same digits on each) and on the named training, test and midpoint backgrounds, by digit colour.

* **length**: the Baseline CNN (Table 1's first row), seed 0, at 10,000 steps (the `cpu` report's length) and on to
  30,000 from the same run: does a longer run move the shift?
* **seeds**: the Baseline on seeds 1 and 2 at 10,000 steps;
* **Ours**: the paper's model (swap, SupCon, class-mean invariance), seed 0, at 10,000 steps;
* **`--digits mnist`**: the Baseline on seeds 0-2 at 10,000 steps on the full MNIST (60,000 training digits, the
  paper's data) instead of the embedded 10,000: does the digit set move the shift? (The data directory must hold MNIST:
  `python3 -m disentbook data prepare mnist`; without `--digits mnist` it must not, so that each measurement is on the
  digits its name says.)

    python3 benchmarks/diagnose_colour_shift.py            # every measurement not done yet (about 20 minutes, 2 cores)
    python3 benchmarks/diagnose_colour_shift.py --digits mnist   # the Baseline on the full MNIST (about 10 minutes)
    python3 benchmarks/diagnose_colour_shift.py --report   # the tables from the measurements done so far

Each measurement is kept in `benchmarks/colour_shift-invariance.json` at once (a later call goes on from there, its
runs' checkpoints in `results/diagnose_colour_shift/`), and `--report` draws `benchmarks/colour_shift-invariance.png`.
"""
from __future__ import annotations
import argparse, itertools, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "colour_shift-invariance.json"
FIGURE = OUT.with_suffix(".png")
WORK = ROOT / "results" / "diagnose_colour_shift"
LEVELS = (0.1, 0.3, 0.5, 0.7, 0.9)        # each channel of a grid background
N_IMAGES = 600                            # test digits drawn on each background (the same ones on every background)
CHUNK = 1000
ROWS = {"inv_cnn": "Baseline", "swap_invariance": "Ours"}
MEASURE = {"embedded": [("inv_cnn", 0, (10_000, 30_000)), ("inv_cnn", 1, (10_000,)), ("inv_cnn", 2, (10_000,)),
                        ("swap_invariance", 0, (10_000,))],
           "mnist": [("inv_cnn", 0, (10_000,)), ("inv_cnn", 1, (10_000,)), ("inv_cnn", 2, (10_000,))]}


def key(slug: str, seed: int, steps: int, digits: str = "embedded") -> str:
    return f"{slug}/seed{seed}/{steps}" + ("" if digits == "embedded" else f"/{digits}")


def shown(path: Path) -> Path: return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def backgrounds() -> tuple[list[tuple], dict]:
    "(the grid's colours, {name: colour} of the training, test and midpoint backgrounds)."
    from disentbook.data.colored_mnist import BACKGROUNDS_TEST, BACKGROUNDS_TEST_MIDPOINT, BACKGROUNDS_TRAIN
    named = {**{f"train {k}": v for k, v in BACKGROUNDS_TRAIN.items()}, **{f"test {k}": v for k, v in BACKGROUNDS_TEST.items()},
             **{f"midpoint {k}": v for k, v in BACKGROUNDS_TEST_MIDPOINT.items()}}
    return list(itertools.product(LEVELS, LEVELS, LEVELS)), named


def _trainer(slug: str, seed: int, steps: int, digits: str = "embedded"):
    "(trainer, data, cfg, row) of the run, resumed from its checkpoint under WORK."
    from disentbook.campaign.papers import PaperRow
    from disentbook.repro.runs import build_trainer
    row = PaperRow("invariance", slug)
    job = dict(row.job(ROOT, seed), out=str((WORK if digits == "embedded" else WORK / digits) / slug / f"seed{seed}"))
    job["options"] = {**job["options"], "precision": "fp32"}      # as its measurements so far, whatever the campaign's
    trainer, data, cfg = build_trainer(job, steps=steps, ckpt_every=CHUNK)
    return trainer, data, cfg, row


def measure(slug: str, seed: int, steps: int, digits: str = "embedded") -> dict:
    "Train the run on to `steps` (a checkpoint every CHUNK steps) and score it on every background."
    import numpy as np, torch
    from disentbook.core import active_time
    from disentbook.data.colored_mnist import DIGIT_COLOURS, colorize, digit_pool
    from disentbook.repro.invariance_eval import class_probe
    torch.set_num_threads(2)
    trainer, data, cfg, row = _trainer(slug, seed, steps, digits)
    t0 = active_time()
    while trainer.step < steps:
        trainer.fit(min(CHUNK, steps - trainer.step)); trainer.save()
    secs = active_time() - t0
    if trainer.step != steps:                    # a run trained further before (its measurements since removed)
        raise SystemExit(f"{slug} seed {seed} is at step {trainer.step:,}, past {steps:,}: remove "
                         f"{shown(WORK / slug / f'seed{seed}')} to measure it at {steps:,}")
    predict, _ = class_probe(trainer.model.eval(), data, cfg, seed, row.spec)       # the reproduction's evaluation classifier
    pool, source = digit_pool("auto", "test")     # the reproduction's test digits
    g = np.random.default_rng(seed)
    y, inst, fg = g.integers(0, 10, N_IMAGES), g.integers(0, pool.shape[1], N_IMAGES), g.integers(0, len(DIGIT_COLOURS), N_IMAGES)
    grey, fgs = pool[y, inst].float() / 255, torch.tensor(list(DIGIT_COLOURS.values()))[fg]

    def score(bg):
        pred = predict(colorize(grey, fgs, torch.tensor(bg).float().expand(N_IMAGES, 3)))
        return float((pred == y).mean()), {k: round(float((pred[fg == i] == y[fg == i]).mean()), 4) for i, k in enumerate(DIGIT_COLOURS)}

    grid, named = backgrounds()
    cells = [[*bg, round(score(bg)[0], 4)] for bg in grid]
    names = {}
    for name, bg in named.items():
        a, per = score(bg)
        names[name] = dict(bg=list(bg), acc=round(a, 4), per_digit_colour=per)
    acc = np.array([c[3] for c in cells]).reshape(len(LEVELS), len(LEVELS), len(LEVELS))
    by = {ch: [round(float(v), 4) for v in acc.mean(axis=tuple(j for j in range(3) if j != i))] for i, ch in enumerate("RGB")}
    return dict(row=ROWS.get(slug, slug) + ("" if digits == "embedded" else f" ({digits.upper()})"), slug=slug, seed=seed, steps=steps, digits=source, images_per_background=N_IMAGES,
                levels=list(LEVELS), grid=cells, named=names, by_level=by, precision=trainer.precision,
                train_seconds=round(secs, 1))


def ordered(done: dict) -> list[dict]:
    "The measurements, the Baseline's first, by seed and length."
    return [done[k] for k in sorted(done, key=lambda k: (done[k]["slug"] != "inv_cnn", "(" in done[k]["row"], done[k]["seed"],
                                                          done[k]["steps"]))]


def report(done: dict) -> str:
    import numpy as np
    ms = ordered(done)
    if not ms: return "no measurement yet"
    names = list(ms[0]["named"])
    L = ["Accuracy on the named backgrounds (the test digits; every digit colour):", "",
         "| model | seed | steps | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    L += [f"| {x['row']} | {x['seed']} | {x['steps']:,} | " + " | ".join(f"{x['named'][n]['acc']:.3f}" for n in names) + " |" for x in ms]
    levels = ms[0]["levels"]
    L += ["", "Accuracy over the grid's backgrounds by the level of one channel (mean over the other two channels' levels):", "",
          "| model | seed | steps | channel | " + " | ".join(f"{v:g}" for v in levels) + " |", "|---|---|---|---|" + "---|" * len(levels)]
    for x in ms:
        for ch in "RGB": L.append(f"| {x['row']} | {x['seed']} | {x['steps']:,} | {ch} | " + " | ".join(f"{v:.3f}" for v in x["by_level"][ch]) + " |")
    L += [""]
    for x in ms:
        lo = [c[3] for c in x["grid"] if c[0] == min(levels)]
        hi = [c[3] for c in x["grid"] if c[0] >= 0.5]
        dark = [c[3] for c in x["grid"] if c[0] == min(levels) and max(c[1], c[2]) >= 0.5]
        L.append(f"- {x['row']}, seed {x['seed']}, {x['steps']:,} steps: red at {min(levels):g}: {np.mean(lo):.3f} "
                 f"(with green or blue at 0.5 or more: {np.mean(dark):.3f}); red at 0.5 or more: {np.mean(hi):.3f}")
    return "\n".join(L)


def figure(done: dict, path: Path | None = None):
    "One strip per measurement: a green x blue accuracy map at each red level (into `path`, default FIGURE)."
    import numpy as np
    from matplotlib.figure import Figure
    ms = ordered(done)
    if not ms: return None
    levels = ms[0]["levels"]; n = len(levels)
    fig = Figure(figsize=(1.6 * n + 1.0, 1.5 * len(ms) + 0.3), dpi=80, layout="constrained")
    axes = fig.subplots(len(ms), n, squeeze=False)
    for i, x in enumerate(ms):
        acc = np.array([c[3] for c in x["grid"]]).reshape(n, n, n)
        for j, r in enumerate(levels):
            ax = axes[i, j]
            im = ax.imshow(acc[j], vmin=0, vmax=1, cmap="viridis", origin="lower")
            ax.set_xticks(range(n), [f"{v:g}" for v in levels], fontsize=6); ax.set_yticks(range(n), [f"{v:g}" for v in levels], fontsize=6)
            if i == len(ms) - 1: ax.set_xlabel("blue", fontsize=7)
            if j == 0: ax.set_ylabel(f"{x['row']} s{x['seed']} {x['steps'] // 1000}k\ngreen", fontsize=7)
            if i == 0: ax.set_title(f"red {r:g}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.6, label="accuracy")
    path = Path(path or FIGURE); fig.savefig(path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="print the tables and draw the figure from the measurements done so far; train nothing")
    ap.add_argument("--digits", choices=sorted(MEASURE), default="embedded", help="the digits the runs train and are "
                    "scored on: the embedded 10,000 (default) or the full MNIST from the data directory")
    a = ap.parse_args(argv)
    from disentbook.data.digits import digits_in_use
    if not a.report and digits_in_use() != a.digits:
        raise SystemExit(f"--digits {a.digits}: the data directory gives the {digits_in_use()} digits; " +
                         ("put MNIST there first: python3 -m disentbook data prepare mnist" if a.digits == "mnist" else
                          "point DISENTBOOK_DATA at a folder without MNIST for these measurements"))
    state = json.loads(OUT.read_text()) if OUT.exists() else dict(machine=dict(cpu=platform.processor() or platform.machine()), runs={})
    done = state["runs"]
    if not a.report:
        for slug, seed, lengths in MEASURE[a.digits]:
            for steps in lengths:
                k = key(slug, seed, steps, a.digits)
                if k in done: continue
                done[k] = x = measure(slug, seed, steps, a.digits)
                OUT.write_text(json.dumps(state, indent=1) + "\n")
                print(f"{k}: cyan {x['named']['test cyan']['acc']:.3f} magenta {x['named']['test magenta']['acc']:.3f} "
                      f"yellow {x['named']['test yellow']['acc']:.3f} ({x['train_seconds']:.0f} s)", flush=True)
    print(report(done))
    if figure(done): print(f"figure: {shown(FIGURE)}")


if __name__ == "__main__":
    main()
