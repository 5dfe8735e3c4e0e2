"""The CPU campaign: long training in stages that survive job time limits, run in the background while other work goes on.

    python3 tools/campaign.py --list                          # the stages, in order, with what each runs and its status
    python3 tools/campaign.py --next --budget 150m            # the stages not done yet, until the wall budget is spent
    python3 tools/campaign.py --stage dsprites-curves --budget 60m
    nice -n 10 python3 tools/campaign.py --next --budget 150m > results/campaign/log.txt 2>&1 &   # in the background
    python3 tools/campaign.py --pause                         # the running campaign stops at its next chunk boundary
    python3 tools/campaign.py --go-on                         # ... and goes on (SIGSTOP / SIGCONT work as well)

Every run trains in chunks of `CHUNK` steps (about a minute on two cores): a checkpoint at each chunk's end, from which a
killed or timed-out campaign resumes bit-exactly (the trainer's checkpoints restore weights, optimizers and generators),
so a stage cut short loses at most one chunk. Before each chunk the campaign checks its pause file and its budget: a chunk
that would not finish within the budget (at the rate measured so far) is not started, and the stage ends `partial`, to be
continued by the next `--next`. Working files (checkpoints, optimizer state) stay in `results/campaign/` (ignored by git);
what lands in the checkout is small: the learning curves (`benchmarks/curves/NAME.csv` and `.png`), the ledger
`benchmarks/campaign.json` (each stage's status, seconds, CPU, precision, torch), and, from the models stage, the fp16
weights and cards of the shipped models (`disentbook/assets/pretrained/`) with their figures (`reports/pretrained/`).

Stages:
- `dsprites-curves`: each dSprites recipe of `tools/train_pretrained.py` trained once to `MAX_STEPS`, measured at every
  length of `LENGTHS` (MIG on 10,000 fresh images with each factor's best latent and gap, FactorVAE score, KL per latent,
  the loss terms): its learning curve.
- `dsprites-models`: each recipe's length chosen from its curve by `choose_length` (a rule fixed before the curves were
  measured), the checkpoint at that length packaged as the shipped model (card with its curve, traversal figure).
- `precision-check`: benchmarks/bench_precision.py (bf16 against fp32 over seeds).
- `gpu-tests`, `gpu-bench`, `gpu-<paper>`, `gpu-pretrained`: the GPU stages, run on a machine with a CUDA GPU by
  `--next --gpu` (or `--stage gpu-bench`) through `tools/gpu_campaign.py`, whose archives travel back from a lent GPU
  machine and whose ledger (`benchmarks/gpu_campaign.json`) records what landed. `--list` shows both kinds.
"""
from __future__ import annotations
import argparse, datetime, json, os, platform, re, shutil, signal, sys, threading, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))                    # the checkout's disentbook, installed or not
sys.path.insert(0, str(ROOT / "tools"))

RESULTS = ROOT / "results" / "campaign"          # working files (ignored by git)
LEDGER = ROOT / "benchmarks" / "campaign.json"   # what is done (committed)
CURVES = ROOT / "benchmarks" / "curves"          # learning curves (committed)
FIGURES = ROOT / "reports" / "pretrained"        # the shipped models' figures (committed)
PAUSE_POLL = 5.0                                 # seconds between looks at the pause file
CHUNK = 1000                                     # steps between checkpoints, pause and budget checks
DSPRITES = ("factor_vae", "tcwae_mws", "dip_vae_i", "beta_vae_b4", "dip_vae_ii", "beta_vae_b1")
LENGTHS = (1000, 2500, 5000, 7500, 10_000, 15_000, 20_000)       # where each curve is measured
# the dSprites recipes' training settings (method and weights: train_pretrained.RECIPES); the length comes from the curve
SETTINGS = dict(batch_size=64, lr=5e-4, hidden=128, latent_dim=10, threads=2, precision="auto", seed=0)
EVAL = dict(num_points=10_000, seed=2026, fvae=dict(batch_size=64, num_train=500, num_eval=300, num_variance_estimate=5000))
FLAT = 0.02          # choose_length: no later measured length improves MIG by this much
KL_ACTIVE = 0.01     # nats: a latent whose mean KL is below this carries nothing (collapsed)
STAGES = {
    "dsprites-curves": "the six dSprites recipes, each one run to 20,000 steps (bf16 where native, 2 threads), measured "
                       "at 1,000-20,000 steps: MIG (10,000 fresh images), FactorVAE score, KL per latent, losses",
    "dsprites-models": "each recipe at the length its curve chose (choose_length), packaged: fp16 weights, card with "
                       "the curve, traversal figure",
    "precision-check": "benchmarks/bench_precision.py: seven methods x seeds 0-2 x fp32 and bf16, 1,500 steps each, "
                       "final losses and metrics against the spread between the fp32 seeds (benchmarks/precision.json)",
}


class CampaignError(Exception):
    "A one-line error for the user (exit status 2)."


# ---------------------------------------------------------------- ledger, pause, budget
def read_ledger(path: Path | None = None) -> dict:
    path = path or LEDGER
    try: d = json.loads(Path(path).read_text())
    except FileNotFoundError: return {"stages": {}}
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path} is not readable JSON ({type(e).__name__}); restore it with git checkout") from None
    return d if isinstance(d, dict) and isinstance(d.get("stages"), dict) else {"stages": {}}


def write_ledger(stage: str, record: dict, path: Path | None = None):
    path = path or LEDGER
    d = read_ledger(path)
    d["stages"][stage] = record
    d["what"] = ("Stages of tools/campaign.py: status ok (done), partial (cut by its budget or a kill; --next goes on "
                 "from its last checkpoint) or failed, with the machine, precision and seconds they ran.")
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(d, indent=1) + "\n"); os.replace(tmp, path)


def machine() -> dict:
    import torch
    from disentbook.train import cpu_native_bf16
    cpu = platform.processor() or platform.machine()
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        if m: cpu = m.group(1).strip()
    except OSError: pass
    return dict(cpu=cpu, cores=os.cpu_count(), native_bf16=cpu_native_bf16(), torch=torch.__version__,
                python=platform.python_version())


def parse_budget(text: str) -> float:
    "'150m', '2h', '90s' or a number of minutes -> seconds."
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
    if not m: raise CampaignError(f"--budget {text!r}: expected minutes, or a number with s, m or h (e.g. 150m, 2h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "": 60}[m.group(2)]


def pause_file() -> Path: return RESULTS / "PAUSE"


class Clock:
    "The wall budget of one campaign call, the pause file, and the measured seconds per chunk (for the budget test)."
    def __init__(self, budget_s: float):
        self.t0, self.budget, self.chunk_s = time.monotonic(), budget_s, None
    def left(self) -> float: return self.budget - (time.monotonic() - self.t0)
    def wait_while_paused(self):
        said = False
        while pause_file().exists():
            if not said: print(f"paused ({pause_file()} exists; `tools/campaign.py --go-on` continues)", flush=True); said = True
            time.sleep(PAUSE_POLL)
    def fits(self, seconds: float | None = None) -> bool:
        "Whether a chunk (or `seconds` of work) still fits in the budget, with a 20 % margin."
        need = seconds if seconds is not None else (self.chunk_s or 60.0)
        return self.left() > 1.2 * need
    def took(self, seconds: float):
        self.chunk_s = seconds if self.chunk_s is None else max(seconds, 0.7 * self.chunk_s + 0.3 * seconds)


# ---------------------------------------------------------------- measurement along a run
_DATA = {}
def _dsprites():
    if "d" not in _DATA:
        from disentbook.data.dsprites import DSprites
        _DATA["d"] = DSprites()
    return _DATA["d"]


def measure_dsprites(model, num_points: int | None = None, seed: int | None = None) -> dict:
    """A dSprites model's disentanglement on `num_points` fresh images (factors drawn by `seed`, the same images at every
    length): MIG with each factor's best latent and normalised gap, the FactorVAE score, the mean KL of each latent and
    the number of active latents (KL above `KL_ACTIVE`)."""
    import torch
    from disentbook.core import to_float_images
    from disentbook.eval.metrics import discretize, entropy, mutual_info
    from disentbook.eval.scores import factor_vae_score, make_represent
    num_points, seed = num_points or EVAL["num_points"], EVAL["seed"] if seed is None else seed
    data, rng = _dsprites(), np.random.default_rng(seed)
    factors = data.sample_factors(num_points, rng)
    images = data.sample_observations_from_factors(factors, rng)
    model = model.eval()
    mus, kls = [], []
    with torch.no_grad():
        for i in range(0, num_points, 1000):
            mu, lv = model.encode(to_float_images(images[i:i + 1000]))
            mus.append(mu.float()); kls.append(0.5 * (mu.float() ** 2 + lv.float().exp() - 1 - lv.float()))
    codes, kl = torch.cat(mus).numpy().astype(np.float64), torch.cat(kls).mean(0).numpy()
    f = factors.numpy()
    keep = [k for k, n in enumerate(data.factor_sizes) if n > 1]
    mi, h = mutual_info(discretize(codes), f[:, keep]), entropy(f[:, keep])
    row = {}
    gaps = []
    for j, k in enumerate(keep):
        order = np.argsort(mi[:, j])[::-1]
        gap = float((mi[order[0], j] - mi[order[1], j]) / h[j]); gaps.append(gap)
        row[f"gap/{data.factor_names[k]}"] = gap; row[f"latent/{data.factor_names[k]}"] = int(order[0])
    row["mig"] = float(np.mean(gaps))
    row["factor_vae"] = float(factor_vae_score(data, make_represent(model), seed=seed, **EVAL["fvae"])[1])   # eval accuracy
    row["active"] = int((kl > KL_ACTIVE).sum())
    row.update({f"kl/{i}": float(v) for i, v in enumerate(kl)})
    return row


def choose_length(rows: list[dict], key: str = "mig", flat: float = FLAT) -> tuple[int, str]:
    """The training length a learning curve asks for (fixed before any curve was measured): the shortest measured length L
    from which no longer measured length improves `key` by `flat` or more; a curve still rising at its longest length
    takes that length and says so. Returns (steps, why)."""
    rows = sorted(rows, key=lambda r: r["steps"])
    if not rows: raise CampaignError("choose_length: an empty curve")
    vals = [r[key] for r in rows]
    for i, r in enumerate(rows):
        if max(vals[i:]) - vals[i] < flat:
            rising = i == len(rows) - 1 and len(rows) > 1 and vals[-1] - vals[-2] >= flat
            why = (f"still rising at the longest length measured ({key} {vals[-2]:.3f} -> {vals[-1]:.3f} over the last "
                   f"{rows[-1]['steps'] - rows[-2]['steps']:,} steps)" if rising else
                   f"the shortest length from which no longer run measured improves {key} by {flat} or more "
                   f"({key} {vals[i]:.3f}; best {max(vals):.3f} at {rows[int(np.argmax(vals))]['steps']:,} steps)")
            return int(r["steps"]), why
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- the curves stage
def _recipe(name: str) -> tuple[str, dict]:
    from train_pretrained import RECIPES
    method, dataset, params, _, _ = RECIPES[name]
    if dataset != "dsprites": raise CampaignError(f"{name} is not a dSprites recipe")
    return method, params


def curve_dir(name: str) -> Path: return RESULTS / "curves" / name


def read_curve(name: str) -> list[dict]:
    f = curve_dir(name) / "curve.jsonl"
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


def train_to(name: str, steps: int, clock: Clock) -> bool:
    "Train recipe `name`'s curve run up to `steps` in chunks; False when the budget ran out first."
    from disentbook.cli import train_job
    method, params = _recipe(name)
    run, s = curve_dir(name) / "run", SETTINGS
    while (at := _at(run)) < steps:
        clock.wait_while_paused()
        if not clock.fits(): return False
        target = min(steps, (at // CHUNK + 1) * CHUNK)
        t0, c0 = time.monotonic(), time.process_time()
        train_job(method=method, dataset="dsprites", params=params, steps=target,
                  batch_size=None if at else s["batch_size"], lr=None if at else s["lr"], latent_dim=s["latent_dim"],
                  hidden=s["hidden"], out_dir=run, device="cpu", seed=s["seed"], evaluate=False, threads=s["threads"],
                  precision=None if at else s["precision"], ckpt_every=CHUNK, resume=at > 0, overwrite=at == 0)
        dt, cpu = time.monotonic() - t0, time.process_time() - c0
        clock.took(dt * CHUNK / max(target - at, 1))
        # training seconds of the run so far (chunks, data building included): wall (a paused campaign's wall time
        # includes the pause) and CPU seconds of all threads (which a pause does not inflate)
        f, prev = curve_dir(name) / "seconds.json", _seconds(curve_dir(name))
        f.write_text(json.dumps(dict(seconds=prev["seconds"] + dt, cpu_seconds=prev.get("cpu_seconds", 0.0) + cpu, step=target)))
        _progress(name, target, time.monotonic() - t0, target - at)
    return True


def _progress(name, step, seconds, steps):
    print(f"{datetime.datetime.now():%H:%M:%S} {name}: step {step:,} ({steps / max(seconds, 1e-9):.1f} steps/s)", flush=True)


def run_curve(name: str, clock: Clock, lengths=None) -> bool:
    "Recipe `name`'s learning curve, measured at each of `lengths` (resuming what earlier calls did); False if cut short."
    from disentbook.train import load_model, read_checkpoint_config
    rows, out, lengths = read_curve(name), curve_dir(name), lengths or LENGTHS
    done = {r["steps"] for r in rows}
    for L in lengths:
        if L in done: continue
        if not train_to(name, L, clock): return False
        model = load_model(out / "run" / "checkpoint", device="cpu")
        t0 = time.monotonic()
        row = dict(steps=L, **measure_dsprites(model), **_losses(out / "run", L))
        cfg = read_checkpoint_config(out / "run" / "checkpoint")
        row["seconds_eval"] = round(time.monotonic() - t0, 1)
        keep = out / f"step_{L}"                          # the checkpoint at each measured length (packaging reads it)
        shutil.rmtree(keep, ignore_errors=True); shutil.copytree(out / "run" / "checkpoint", keep / "checkpoint")
        run_info = json.loads((out / "run" / "run.json").read_text())
        row["precision"] = run_info.get("precision")
        sec = _seconds(out)
        row["train_seconds"], row["train_cpu_seconds"] = round(sec["seconds"], 1), round(sec.get("cpu_seconds", float("nan")), 1)
        assert cfg["step"] == L
        with open(out / "curve.jsonl", "a") as f: f.write(json.dumps(row) + "\n")
        print(f"{name} at {L:,} steps: MIG {row['mig']:.3f}, FactorVAE {row['factor_vae']:.3f}, active {row['active']} "
              f"({row['seconds_eval']:.0f} s to measure)", flush=True)
        write_curve_files(name)
    return True


def _seconds(out: Path) -> dict:
    "Training wall and CPU seconds so far, from the chunk log the campaign keeps beside the run."
    f = out / "seconds.json"
    return json.loads(f.read_text()) if f.is_file() else dict(seconds=0.0, cpu_seconds=0.0)


def write_curve_files(name: str):
    "benchmarks/curves/NAME.csv and NAME.png from the measured rows."
    import pandas as pd
    rows = read_curve(name)
    if not rows: return
    CURVES.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows).sort_values("steps")
    df.to_csv(CURVES / f"{name}.csv", index=False, float_format="%.5g")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].plot(df["steps"], df["mig"], "o-", label="MIG", lw=2)
    ax[0].plot(df["steps"], df["factor_vae"], "s--", label="FactorVAE score")
    for fac in ("scale", "posX", "posY"):
        ax[0].plot(df["steps"], df[f"gap/{fac}"], ":", label=f"gap of {fac}")
    ax[0].set_xlabel("training steps (batch 64)"); ax[0].set_ylim(0, 1); ax[0].legend(fontsize=7); ax[0].grid(alpha=.3)
    ax[0].set_title(f"{name}: disentanglement along the run (10,000 fresh images)", fontsize=9)
    rec = [c for c in df.columns if c in ("loss/recon", "loss/nll", "loss/rec")]
    for c in rec + [c for c in df.columns if c.startswith("loss/") and c not in rec and c != "loss/loss"][:3]:
        ax[1].plot(df["steps"], df[c], "o-", label=c.split("/")[1])
    ax[1].set_yscale("symlog"); ax[1].set_xlabel("training steps"); ax[1].legend(fontsize=7); ax[1].grid(alpha=.3)
    ax[1].set_title("loss terms (mean of the last 500 steps)", fontsize=9)
    fig.tight_layout(); fig.savefig(CURVES / f"{name}.png", dpi=90); plt.close(fig)


def stage_curves(clock: Clock, names=DSPRITES) -> str:
    for n in names:
        if not run_curve(n, clock): return "partial"
    return "ok"


# ---------------------------------------------------------------- the models stage
LENGTHS_FILE = CURVES / "lengths.json"      # each dSprites recipe's length, chosen from its curve (train_pretrained reads it)


def traversal_figure_by_factor(model, row: dict, title: str, n_steps: int = 9, span: float = 2.5):
    """Rows: for each dSprites factor, the latent that carries most information about it (`latent/NAME` of a curve row)
    traversed from -span to span on one fresh image; labelled with the factor and its normalised gap."""
    import torch
    from disentbook.eval.viz import image_grid, traversal_images
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    facs = ["shape", "scale", "orientation", "posX", "posY"]
    dims = [int(row[f"latent/{f}"]) for f in facs]
    x0, _ = _dsprites().sample(1, np.random.default_rng(7))
    from disentbook.core import to_float_images
    with torch.no_grad(): imgs = traversal_images(model.eval(), to_float_images(x0), dims, torch.linspace(-span, span, n_steps))
    fig, ax = plt.subplots(figsize=(n_steps * 0.75 + 2.6, len(dims) * 0.8 + 0.5))
    ax.imshow(image_grid(imgs, nrow=n_steps), cmap="gray" if imgs.shape[1] == 1 else None)
    h = imgs.shape[-1] + 1
    ax.set_yticks([h * (i + 0.5) for i in range(len(dims))])
    ax.set_yticklabels([f"{f}: latent {d} (gap {row[f'gap/{f}']:.2f})" for f, d in zip(facs, dims)], fontsize=8)
    ax.set_xticks([]); ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def stage_models(clock: Clock, names=DSPRITES) -> str:
    """Each recipe at the length its curve chose, packaged by tools/train_pretrained.py from the curve run's checkpoint at
    that length (bit-identical to a straight run of that length): fp16 weights, card with its curve and figures."""
    import train_pretrained as TP
    from disentbook.eval.viz import save_figure
    from disentbook.train import load_model
    lengths = json.loads(LENGTHS_FILE.read_text()) if LENGTHS_FILE.is_file() else {}
    for n in names:
        rows = read_curve(n)
        if not rows or max(r["steps"] for r in rows) < max(LENGTHS):
            print(f"{n}: its curve is not complete ({len(rows)} of {len(LENGTHS)} lengths); run dsprites-curves first")
            return "partial"
        L, why = choose_length(rows)
        row = next(r for r in rows if r["steps"] == L)
        lengths[n] = dict(steps=L, why=why, mig=row["mig"], factor_vae=row["factor_vae"], active=row["active"],
                          train_seconds=row["train_seconds"], train_cpu_seconds=row.get("train_cpu_seconds"),
                          precision=row["precision"])
        LENGTHS_FILE.write_text(json.dumps(lengths, indent=1) + "\n")
    import importlib; importlib.reload(TP)                   # its settings read the lengths just written
    runs = RESULTS / "pretrained_runs"
    for n in names:
        clock.wait_while_paused()
        L = lengths[n]["steps"]
        src = curve_dir(n) / f"step_{L}" / "checkpoint"
        shutil.rmtree(runs / n / "checkpoint", ignore_errors=True); shutil.copytree(src, runs / n / "checkpoint")
        trained = dict(seconds=lengths[n]["train_seconds"], steps=L, from_curve=True)
        card = TP.package(n, runs, trained, TP.DEFAULT_DEST)
        model = load_model(src, device="cpu")
        row = next(r for r in read_curve(n) if r["steps"] == L)
        FIGURES.mkdir(parents=True, exist_ok=True)
        save_figure(traversal_figure_by_factor(model, row, f"{n} at {L:,} steps: each factor's most informative latent"),
                    FIGURES / f"{n}_traversals.png")
        shutil.copy(CURVES / f"{n}.png", FIGURES / f"{n}_curve.png")
        print(f"{n}: packaged at {L:,} steps (MIG on fresh images {row['mig']:.3f}); card metrics {card['metrics'].get('mig/mig/train', '?')}",
              flush=True)
    return "ok"


def stage_precision(clock: Clock) -> str:
    "Every (method, seed, precision) run of benchmarks/bench_precision.py not done yet, while the budget lasts."
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_precision as BP
    last = 150.0                                       # seconds of the last run (a first guess before any)
    for m in BP.METHODS:
        for seed in BP.SEEDS:
            for prec in ("fp32", "bf16"):
                if (BP.RUNS / m / prec / f"seed{seed}" / "result.json").is_file(): continue
                clock.wait_while_paused()
                # a run (1,500 steps, about two chunks) is not checkpointed mid-way: start it only if it fits
                if not clock.fits(1.5 * last): BP.write(BP.compare(BP.collect())); return "partial"
                t0 = time.monotonic(); BP.run(m, prec, seed); last = time.monotonic() - t0
    rows = BP.compare(BP.collect()); BP.write(rows); print(BP.markdown(rows), flush=True)
    return "ok"


STAGE_FNS = {"dsprites-curves": stage_curves, "dsprites-models": stage_models, "precision-check": stage_precision}
# the papers' headline rows along one run each (tools/paper_curves.py): the lengths of the `cpu` scale
PAPER_CURVES = ("dipvae", "tcwae", "contrastive", "refvae", "invariance")
for _p in PAPER_CURVES:
    STAGES[f"curves-{_p}"] = (f"{_p}'s headline rows (tools/paper_curves.py HEADLINE), one run each (seed 0) measured with the "
                              "paper's evaluation at a list of lengths: the learning curves the cpu scale's lengths come from")
    STAGE_FNS[f"curves-{_p}"] = (lambda p: lambda clock: __import__("paper_curves").stage(p, clock))(_p)


# ---------------------------------------------------------------- the GPU stages (tools/gpu_campaign.py)
def _gpu():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_campaign", ROOT / "tools" / "gpu_campaign.py")
    G = importlib.util.module_from_spec(spec); spec.loader.exec_module(G)
    return G


GPU_STAGES = {f"gpu-{s}": s for s in ("tests", "bench", "vae", "dipvae", "tcwae", "contrastive", "refvae", "invariance",
                                      "pretrained")}


def gpu_status(stage: str) -> str:
    G = _gpu()
    return "ok" if G.landed(G.LEDGER, GPU_STAGES[stage]) else "not landed"


def run_gpu_stage(stage: str, extra: list[str]) -> int:
    "One GPU stage through tools/gpu_campaign.py (which refuses, in one line, without a CUDA GPU)."
    return _gpu().main(["--stage", GPU_STAGES[stage], *extra])


def run_stage(stage: str, clock: Clock) -> str:
    if stage not in STAGE_FNS: raise CampaignError(f"stage {stage!r} is not runnable here yet")
    from disentbook.train import resolve_precision
    t0 = time.monotonic()
    prev = read_ledger()["stages"].get(stage, {})
    write_ledger(stage, dict(prev, status="running", started=f"{datetime.datetime.now():%Y-%m-%d %H:%M}"))
    try: status = STAGE_FNS[stage](clock)
    except BaseException:
        write_ledger(stage, dict(prev, status="partial", seconds=round(prev.get("seconds", 0) + time.monotonic() - t0)))
        raise
    write_ledger(stage, dict(status=status, seconds=round(prev.get("seconds", 0) + time.monotonic() - t0),
                             precision=resolve_precision(SETTINGS["precision"], "cpu")[0], threads=SETTINGS["threads"],
                             finished=f"{datetime.datetime.now():%Y-%m-%d %H:%M}", **machine()))
    return status


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true", help="the stages and their status")
    g.add_argument("--next", action="store_true", help="run the stages not done yet, in order, within --budget")
    g.add_argument("--stage", choices=[*STAGES, *GPU_STAGES], help="run one stage (again, from where it stopped)")
    g.add_argument("--pause", action="store_true", help="make a running campaign wait at its next chunk boundary")
    g.add_argument("--go-on", action="store_true", help="let a paused campaign go on")
    p.add_argument("--gpu", action="store_true", help="with --next: the GPU stages not landed yet (needs a CUDA GPU)")
    p.add_argument("--budget", default="150m", help="wall budget of this call (e.g. 150m, 2h): no chunk is started that "
                   "would not end within it")
    a = p.parse_args(argv)
    if threading.current_thread() is threading.main_thread():    # a job limit's kill: the ledger says 'partial'
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if a.pause: RESULTS.mkdir(parents=True, exist_ok=True); pause_file().touch(); print(f"pause asked ({pause_file()})"); return 0
        if a.go_on: pause_file().unlink(missing_ok=True); print("go on"); return 0
        led = read_ledger()["stages"]
        if a.list:
            for s, what in STAGES.items():
                r = led.get(s, {})
                print(f"{s:18s} {r.get('status', 'not started'):12s} {what}")
            for s, g in GPU_STAGES.items():
                print(f"{s:18s} {gpu_status(s):12s} on a CUDA GPU: tools/gpu_campaign.py --stage {g} ({_gpu().WHAT[g]})")
            return 0
        if a.stage in GPU_STAGES: return run_gpu_stage(a.stage, [])
        if a.next and a.gpu:
            for s in GPU_STAGES:
                if gpu_status(s) != "ok": return run_gpu_stage(s, [])
            print("every GPU stage has landed"); return 0
        clock = Clock(parse_budget(a.budget))
        todo = [a.stage] if a.stage else [s for s in STAGES if led.get(s, {}).get("status") != "ok"]
        for s in todo:
            st = run_stage(s, clock)
            print(f"stage {s}: {st}", flush=True)
            if st != "ok": return 0
        return 0
    except CampaignError as e:
        print(f"campaign: {e}", file=sys.stderr); return 2


if __name__ == "__main__":
    sys.exit(main())
