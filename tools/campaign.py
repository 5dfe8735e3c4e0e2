"""The CPU campaign: long training in stages that survive job time limits, run in the background while other work goes on.

    python3 tools/campaign.py --list                          # the stages, in order, with what each runs and its status
    python3 tools/campaign.py --next --budget 150m            # the stages not done yet, until the wall budget is spent
    python3 tools/campaign.py --stage dsprites-curves --budget 60m
    nice -n 10 python3 tools/campaign.py --next --budget 150m > results/campaign/log.txt 2>&1 &   # in the background
    python3 tools/campaign.py --pause                         # the running campaign stops at its next chunk boundary
    python3 tools/campaign.py --go-on                         # ... and goes on (SIGSTOP / SIGCONT work as well)
    python3 tools/campaign.py --carry                         # before the checkout moves: cut-short work into git's index

Every run trains in chunks of `CHUNK` steps (about a minute on two cores): a checkpoint at each chunk's end, from which a
killed or timed-out campaign resumes bit-exactly (the trainer's checkpoints restore weights, optimizers and generators),
so a stage cut short loses at most one chunk. Before each chunk the campaign checks its pause file and its budget: a chunk
that would not finish within the budget (at the rate measured so far) is not started, and the stage ends `partial`, to be
continued by the next `--next`; `--carry` (campaign stopped) puts the checkpoints of cut-short runs and unfinished curves
in git's index, so that a new checkout of a commit resumes them too. Working files (checkpoints, optimizer state) stay in `results/campaign/` (ignored by git);
what lands in the checkout is small: the learning curves (`benchmarks/curves/NAME.csv` and `.png`), the ledger
`benchmarks/campaign.json` (each stage's status, seconds, CPU, precision, torch), and, from the models stage, the fp16
weights and cards of the shipped models (`disentbook/assets/pretrained/`) with their figures (`reports/pretrained/`).

Stages:
- `dsprites-curves` (tools/dsprites_curves.py): each dSprites recipe of `tools/train_pretrained.py` trained once to
  20,000 steps, measured at 1,000-20,000 steps (MIG on 10,000 fresh images with each factor's best latent and gap,
  FactorVAE score, KL per latent, the loss terms): its learning curve.
- `dsprites-models`: each recipe's length chosen from its curve by `choose_length` (a rule fixed before the curves were
  measured), the checkpoint at that length packaged as the shipped model (card with its curve, traversal figure).
- `precision-check`: benchmarks/bench_precision.py (bf16 against fp32 over seeds).
- `curves-<paper>` then `cpu-<paper>`, paper by paper: the headline rows' learning curves (tools/paper_curves.py), which
  fix the `cpu` scale's length, then `disentbook reproduce <paper> --scale cpu` into `reports/<paper>-cpu` (its runs'
  checkpoints stay in the report's `runs/`, ignored by git; a cut-short call resumes them). The curve of a row is its
  seed-0 run: the curve keeps its checkpoint at every measured length, and the reproduction resumes seed 0 from the one
  at its length instead of training it again (the report says so, with the curve's training time).
- `cpu-invariance-midpoint`: the invariance cpu reproduction again with the second test palette (`-o palette=midpoint`,
  declared by a rule before it ran), a sensitivity of the package's own, into `reports/invariance-cpu-midpoint`. The
  palette changes the test backgrounds only, so its runs are `cpu-invariance`'s models evaluated again (`EVAL_ONLY`).
- `dsprites-seeds` (tools/dsprites_seeds.py), after the papers: the recipes of `dsprites_curves.SEED_RECIPES` trained
  again with seeds 1-4 to the length their seed-0 curve chose, each measured along its run; the seed with the highest
  MIG on the curves' images ships (`benchmarks/curves/seeds.json`), and every shipped model's card also states its MIG
  on 10,000 other fresh images, which chose neither its length nor its seed.
- `gpu-contact`, `gpu-tests`, `gpu-bench`, `gpu-<paper>`, `gpu-pretrained`: the GPU stages, run on a machine with a CUDA GPU by
  `--next --gpu` (or `--stage gpu-bench`) through `tools/gpu_campaign.py`, whose archives come back from the GPU
  machine and whose ledger (`benchmarks/gpu_campaign.json`) records what landed. `--list` shows both kinds.
"""
from __future__ import annotations
import argparse, datetime, json, os, platform, re, signal, sys, threading, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))                    # the checkout's disentbook, installed or not
sys.path.insert(0, str(ROOT / "tools"))

RESULTS = ROOT / "results" / "campaign"          # working files (ignored by git)
LEDGER = ROOT / "benchmarks" / "campaign.json"   # what is done (committed)
CURVES = ROOT / "benchmarks" / "curves"          # learning curves (committed)
FIGURES = ROOT / "reports" / "pretrained"        # the shipped models' figures (committed)
PAUSE_POLL = 5.0                                 # seconds between looks at the pause file
CHUNK = 1000                                     # steps between checkpoints, pause and budget checks
FLAT = 0.02          # choose_length: no later measured length improves the metric by this much
THREADS = 2          # torch threads of every campaign run
CARRY_SECONDS = 300.0   # --carry: a checkpoint holding less training than this is trained again rather than committed
CPU_MARGIN, CPU_MIN = 30.0, 120.0   # a cpu-<paper> call stops this long before its budget ends; starts only with this much
STAGES = {
    "dsprites-curves": "the seven dSprites recipes, each one run to 20,000 steps (bf16 where native, 2 threads), measured "
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
    from disentbook.core import cpu_name
    from disentbook.train import cpu_native_bf16
    return dict(cpu=cpu_name(), cores=os.cpu_count(), native_bf16=cpu_native_bf16(), torch=torch.__version__,
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
                   f"({key} {vals[i]:.3f}; best {max(vals):.3f} at {rows[vals.index(max(vals))]['steps']:,} steps)")
            return int(r["steps"]), why
    raise AssertionError("unreachable")


def _progress(name, step, seconds, steps):
    print(f"{datetime.datetime.now():%H:%M:%S} {name}: step {step:,} ({steps / max(seconds, 1e-9):.1f} steps/s)", flush=True)


def stage_precision(clock: Clock) -> str:
    "Every (method, seed, precision) run of benchmarks/bench_precision.py not done yet, while the budget lasts."
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_precision as BP
    last = 150.0                                       # seconds of the last run (a first guess before any)
    done = {(r["method"], r["precision"], r["seed"]) for r in BP.collect()}     # the kept results, read once
    for m in BP.METHODS:
        for seed in BP.SEEDS:
            for prec in ("fp32", "bf16"):
                if (m, prec, seed) in done: continue
                clock.wait_while_paused()
                # a run (1,500 steps, about two chunks) is not checkpointed mid-way: start it only if it fits
                if not clock.fits(1.5 * last): BP.write(BP.compare(BP.collect())); return "partial"
                t0 = time.monotonic(); BP.run(m, prec, seed); last = time.monotonic() - t0
    rows = BP.compare(BP.collect()); BP.write(rows); print(BP.markdown(rows), flush=True)
    return "ok"


def _dsprites(fn: str):
    "A stage of tools/dsprites_curves.py, imported when it runs."
    return lambda clock: getattr(__import__("dsprites_curves"), fn)(clock)


STAGE_FNS = {"dsprites-curves": _dsprites("stage_curves"), "dsprites-models": _dsprites("stage_models"),
             "precision-check": stage_precision}
class OutOfBudget(BaseException):
    "The call's wall budget ran out in the middle of a reproduction (its runs go on from their checkpoints next time)."


def reports_dir(paper: str) -> Path: return ROOT / "reports" / f"{paper}-cpu"


# sensitivity runs of the package's own (labelled so in their reports), each after its paper's cpu reproduction:
# stage -> (paper, reproduction options, report folder suffix)
SENSITIVITY = {"cpu-invariance-midpoint": ("invariance", dict(palette="midpoint"), "-midpoint")}
# the sensitivities whose options change the evaluation only: the palette names the unseen test backgrounds, and training
# reads the training backgrounds alone (`repro.invariance_eval.load_invariance_data`), so their runs are the models of
# the paper's cpu reproduction, copied in and evaluated again (a test trains them again and gets the same weights)
EVAL_ONLY = {"cpu-invariance-midpoint"}


def stage_cpu(paper: str, clock: Clock, options: dict | None = None, suffix: str = "", reuse: bool = False) -> str:
    """`disentbook reproduce <paper> --scale cpu` into reports/<paper>-cpu (the length its curves chose), resuming: a
    finished run is reused, a cut-short run goes on from its last checkpoint (a tenth of its length, at least 1,000
    steps). The budget stops it 30 s before its end (`partial`): a timer, since one run does not stop at chunk boundaries;
    SIGSTOP / SIGCONT pause it (the pause file is read between stages only). `reuse` (a sensitivity whose options change
    the evaluation only): each run starts from the finished model of the same row and seed in reports/<paper>-cpu."""
    import torch
    torch.set_num_threads(THREADS)
    import disentbook  # noqa: F401  (registers the papers)
    from disentbook.core import InputError
    from disentbook.repro import harness as H
    left = clock.left() - CPU_MARGIN
    if left < CPU_MIN: return "partial"
    out = Path(str(reports_dir(paper)) + suffix)
    if reuse: seed_from_base(paper, out)
    else: seed_from_curves(paper, out, options or {})
    timer = threading.current_thread() is threading.main_thread()
    def out_of_budget(*_): raise OutOfBudget()
    old = signal.signal(signal.SIGALRM, out_of_budget) if timer else None
    if timer: signal.setitimer(signal.ITIMER_REAL, left)
    try:
        H.reproduce(H.PAPERS[paper], scale="cpu", out_dir=out, device="cpu", resume=True, **(options or {}))
    except OutOfBudget:
        print(f"cpu-{paper}: the budget ran out; the next call goes on from the runs' checkpoints", flush=True)
        return "partial"
    except InputError as e:
        raise CampaignError(str(e)) from None
    finally:
        if timer: signal.setitimer(signal.ITIMER_REAL, 0); signal.signal(signal.SIGALRM, old)
    seeded = {f.parent.parent.name: json.loads(f.read_text())["seconds"] for f in sorted(out.glob(f"runs/*/*/seed0/{FROM_CURVE}"))}
    if seeded: note_seeded(paper, out, seeded)
    based = {f.parent: json.loads(f.read_text()) for f in sorted(out.glob(f"runs/*/*/seed*/{FROM_BASE}"))}
    if based: note_based(paper, out, based)
    return "ok"


FROM_CURVE = "from_curve.json"        # beside a seed-0 run copied from its learning curve: the curve's training seconds


def seed_from_curves(paper: str, out: Path, options: dict) -> dict:
    """Seed 0 of each headline row is the run its learning curve trained (the same settings, data and seed, weights equal
    to a straight run of that length): where the curve kept its checkpoint at the cpu scale's length and the report has
    no seed-0 run of that row yet, copy it in, so the reproduction resumes it at its last step instead of training it
    again (a `FROM_CURVE` file beside it says so). Not for sensitivity runs (other options, other data). Returns
    {slug: seconds of its curve's training} of the runs copied now."""
    import shutil
    import paper_curves as PC
    from disentbook.repro import harness as H
    if options: return {}
    p = H.PAPERS[paper]
    steps = H.scale_config(p, "cpu")["train"]["steps"]
    table_name, slugs = PC.headline(paper)
    opts = {**H.HARNESS_OPTIONS, **p.options, "scale": "cpu"}
    ds = next(t for t in p.tables if t.name == table_name).dataset_name(opts)
    got = {}
    for slug in slugs:
        src = PC.kept_checkpoint(paper, slug, steps)
        dst = H.run_dir(out, ds, dict(slug=slug), 0)
        if src is None or (dst / "eval.json").exists() or (dst / "train").exists(): continue
        shutil.copytree(src, dst / "train" / "checkpoint")
        row = next((r for r in PC.read_rows(paper, slug) if r["steps"] == steps), {})
        got[slug] = float(row.get("train_seconds", float("nan")))
        (dst / FROM_CURVE).write_text(json.dumps(dict(seconds=got[slug], steps=steps, source=f"curves-{paper}")) + "\n")
        print(f"cpu-{paper}: {slug} seed 0 resumes its learning-curve run at {steps:,} steps", flush=True)
    return got


FROM_BASE = "from_base.json"          # beside a sensitivity's run copied from the paper's cpu reproduction


def seed_from_base(paper: str, out: Path) -> int:
    """A sensitivity whose options change the evaluation only (`EVAL_ONLY`): every finished run of reports/<paper>-cpu
    (evaluated, its checkpoint at the scale's length) is copied into the same place of `out`, where the reproduction
    resumes it at its last step, so it is only evaluated, with the sensitivity's options (a `FROM_BASE` file beside it
    names the source and its training seconds). A run the base has not finished trains here as usual. Returns the number
    copied now."""
    import shutil
    from disentbook.core import DisentbookError
    from disentbook.checkpoints import read_checkpoint_config
    from disentbook.repro import harness as H
    base, steps, n = reports_dir(paper), H.scale_config(H.PAPERS[paper], "cpu")["train"]["steps"], 0
    for ev in sorted(base.glob("runs/*/*/seed*/eval.json")):
        src, dst = ev.parent, out / ev.parent.relative_to(base)
        if (dst / "eval.json").exists() or (dst / "train").exists(): continue
        try: cfg = read_checkpoint_config(src / "train" / "checkpoint")
        except (DisentbookError, OSError): continue          # its checkpoint is not here (another checkout): train it
        if cfg.get("step") != steps: continue
        shutil.copytree(src / "train" / "checkpoint", dst / "train" / "checkpoint")
        (dst / FROM_BASE).write_text(json.dumps(dict(seconds=float(cfg.get("train_seconds") or float("nan")), steps=steps,
                                                     source=f"reports/{base.name}")) + "\n")
        n += 1
    if n: print(f"{out.name}: {n} runs are the models of {base.name}, evaluated again with this sensitivity's options", flush=True)
    return n


def _note(paper: str, out: Path, prefix: str, note: str):
    "Add `note` (replacing one that starts with `prefix`) to the report's metrics.json notes, then re-judge (report.md)."
    from disentbook.repro import harness as H
    f = out / "metrics.json"
    m = json.loads(f.read_text())
    m["notes"] = [n for n in m.get("notes", []) if not n.startswith(prefix)] + [note]
    f.write_text(json.dumps(m, indent=1) + "\n")
    H.rejudge(H.PAPERS[paper], out)


def note_seeded(paper: str, out: Path, seeded: dict):
    "Say in the report (its metrics.json notes, then a re-judge that rewrites report.md) which seed-0 runs came from the curves."
    _note(paper, out, "Seed 0 of ", "Seed 0 of " + ", ".join(sorted(seeded)) + " is the run that measured its learning curve "
          f"(tools/campaign.py curves-{paper}: the same settings, data and seed, resumed here from its checkpoint at this "
          "length); its training time, measured along the curve (" + ", ".join(f"{s}: {v:.0f} s" for s, v in sorted(seeded.items()))
          + "), is not in the wall times above.")


def note_based(paper: str, out: Path, based: dict):
    "Say in a sensitivity's report which of its runs are the models of the paper's cpu reproduction, evaluated again."
    total = len(list(out.glob("runs/*/*/seed*/eval.json")))
    src = next(iter(based.values()))["source"]
    secs = sum(v["seconds"] for v in based.values())
    _note(paper, out, "The models of ", f"The models of {len(based)} of these {total} runs are those of `{src}` (the same "
          "row, seed and settings: these options change the evaluation only, training never reads them), evaluated "
          f"again here; their training, {secs / 3600:.2f} hours in all, is in that report and not in the wall times above.")


# each paper: its headline rows along one run each (tools/paper_curves.py), the lengths of its `cpu` scale; then its `cpu`
# reproduction at those lengths, before the next paper's curves (a paper is judged as soon as it can be)
PAPER_CURVES = ("dipvae", "tcwae", "contrastive", "refvae", "invariance", "vae")   # the five papers, then the tutorial
for _p in PAPER_CURVES:
    STAGES[f"curves-{_p}"] = (f"{_p}'s headline rows (the rows its cpu scale trains), one run each (seed 0) measured with the "
                              "paper's evaluation at a list of lengths: the learning curves the cpu scale's lengths come from")
    STAGE_FNS[f"curves-{_p}"] = (lambda p: lambda clock: __import__("paper_curves").stage(p, clock))(_p)
    STAGES[f"cpu-{_p}"] = (f"disentbook reproduce {_p} --scale cpu (the headline rows, 5 seeds (dipvae 3), as long as curves-{_p} "
                           f"chose, resumed from the runs' checkpoints) into reports/{_p}-cpu")
    STAGE_FNS[f"cpu-{_p}"] = (lambda p: lambda clock: stage_cpu(p, clock))(_p)
    for _s, (_q, _o, _x) in SENSITIVITY.items():
        if _q != _p: continue
        STAGES[_s] = (f"the same cpu reproduction with -o {' '.join(f'{k}={v}' for k, v in _o.items())} (a sensitivity of the "
                      f"package's own, labelled so) into reports/{_p}-cpu{_x}" + ("; the options change the evaluation "
                      f"only: cpu-{_p}'s models, evaluated again" if _s in EVAL_ONLY else ""))
        STAGE_FNS[_s] = (lambda s, p, o, x: lambda clock: stage_cpu(p, clock, o, x, reuse=s in EVAL_ONLY))(_s, _q, _o, _x)


# after the papers (a paper's verdicts first; factor_vae's four seeds are about four hours on two cores)
STAGES["dsprites-seeds"] = ("beta_tcvae and factor_vae (the highest seed-0 MIG) again with seeds 1-4 to the length their curve "
                            "chose, each measured along its run; the seed with the highest MIG on the curves' images ships, "
                            "its MIG quoted on 10,000 other fresh images; every recipe packaged again")
STAGE_FNS["dsprites-seeds"] = lambda clock: __import__("dsprites_seeds").stage_seeds(clock)


# ---------------------------------------------------------------- the GPU stages (tools/gpu_campaign.py)
def _gpu():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_campaign", ROOT / "tools" / "gpu_campaign.py")
    G = importlib.util.module_from_spec(spec); spec.loader.exec_module(G)
    return G


GPU_STAGES = {f"gpu-{s}": s for s in ("contact", "tests", "bench", "vae", "dipvae", "tcwae", "contrastive", "refvae", "invariance",
                                      "pretrained")}


def gpu_status(stage: str) -> str:
    G = _gpu()
    rec = G.landed(G.LEDGER, GPU_STAGES[stage])
    return ("collected" if rec.get("status") == "collected" else "ok") if rec else "not landed"


def run_gpu_stage(stage: str, extra: list[str]) -> int:
    "One GPU stage through tools/gpu_campaign.py (which refuses, in one line, without a CUDA GPU)."
    return _gpu().main(["--stage", GPU_STAGES[stage], *extra])


def carried_paths(root: Path | None = None) -> list[Path]:
    """What a new checkout needs to resume the campaign's cut-short work, which lives in files git ignores: the checkpoint
    of every cpu reproduction run that has one but no evaluation yet, and the working files of every paper curve whose
    stage is not done (its measured lengths, seconds and last checkpoint), each checkpoint only when it holds at least
    `CARRY_SECONDS` of training (a shorter one costs less to train again than its megabytes cost git). A curve's kept lengths (`step_*`) are not
    carried: a reproduction's seed 0 then trains again instead of resuming the curve's run."""
    root = Path(root or ROOT)
    led, out = read_ledger()["stages"], []
    from disentbook.core import DisentbookError
    from disentbook.checkpoints import read_checkpoint_config
    def checkpoint(ck: Path) -> list[Path]:          # its config and the state file it names (no leftover temporary file)
        try: cfg = read_checkpoint_config(ck)
        except (DisentbookError, OSError): return []  # none, or not a readable checkpoint: nothing to resume
        return [ck / "config.json", ck / cfg["state_file"]] if float(cfg.get("train_seconds") or 0) >= CARRY_SECONDS else []
    for ck in sorted((root / "reports").glob("*/runs/*/*/seed*/train/checkpoint")):
        run = ck.parent.parent
        if (run / "eval.json").is_file() or not (got := checkpoint(ck)): continue
        out += got + [p for p in (run / FROM_CURVE, run / FROM_BASE) if p.is_file()]   # a copied run says so after
    for d in sorted((RESULTS / "paper_curves").glob("*/*")):
        if led.get(f"curves-{d.parent.name}", {}).get("status") == "ok": continue
        out += [p for p in (d / "curve.jsonl", d / "seconds.json") if p.is_file()] + checkpoint(d / "run" / "checkpoint")
    return sorted(out)


def carry(root: Path | None = None) -> tuple[list[str], list[str]]:
    """Before the checkout moves to another machine (campaign stopped): put `carried_paths` in git's index (forced: they are ignored) and take
    out the ones carried earlier that are no longer needed (a run evaluated since, a curve done; the files stay on disk),
    so a commit carries the cut-short work to a new checkout, which resumes it. Returns (carried, dropped)."""
    import subprocess
    root = Path(root or ROOT)
    def git(*a):
        r = subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True)
        if r.returncode: raise CampaignError(f"git {a[0]} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
        return r.stdout
    now = {p.relative_to(root).as_posix() for p in carried_paths(root)}
    rel = RESULTS.relative_to(root).as_posix() if RESULTS.is_relative_to(root) else None
    tracked = {p for p in git("ls-files", "-z", "--", "reports/*/runs/*/train/checkpoint/*", f"reports/*/runs/*/{FROM_CURVE}", f"reports/*/runs/*/{FROM_BASE}",
                              *([f"{rel}/*"] if rel else [])).split("\0") if p}
    old = sorted(tracked - now)
    if old: git("rm", "-q", "--cached", "--", *old)
    if now: git("add", "-f", "--", *sorted(now))
    return sorted(now), old


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
                             precision=resolve_precision("auto", "cpu")[0], threads=THREADS,
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
    g.add_argument("--carry", action="store_true", help="before the checkout moves to another machine (campaign stopped): add the cut-short "
                   "runs' checkpoints and unfinished curves to git's index, so a new checkout resumes them")
    p.add_argument("--gpu", action="store_true", help="with --next: the GPU stages not landed yet (needs a CUDA GPU)")
    p.add_argument("--recipes", help="with the dsprites stages: these recipes only, comma-separated (the stage stays partial)")
    p.add_argument("--budget", default="150m", help="wall budget of this call (e.g. 150m, 2h): no chunk is started that "
                   "would not end within it")
    a = p.parse_args(argv)
    if threading.current_thread() is threading.main_thread():    # a job limit's kill: the ledger says 'partial'
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if a.pause: RESULTS.mkdir(parents=True, exist_ok=True); pause_file().touch(); print(f"pause asked ({pause_file()})"); return 0
        if a.go_on: pause_file().unlink(missing_ok=True); print("go on"); return 0
        if a.carry:
            now, old = carry()
            print(f"carried {len(now)} file(s) of cut-short work ({sum((ROOT / p).stat().st_size for p in now) / 1e6:.1f} MB)"
                  + (f", {len(old)} no longer needed taken out of the index" if old else "") + ": commit them")
            for p in now: print(f"  {p}")
            return 0
        led = read_ledger()["stages"]
        if a.list:
            for s, what in STAGES.items():
                r = led.get(s, {})
                print(f"{s:23s} {r.get('status', 'not started'):12s} {what}")
            for s, g in GPU_STAGES.items():
                print(f"{s:23s} {gpu_status(s):12s} on a CUDA GPU: tools/gpu_campaign.py --stage {g} ({_gpu().WHAT[g]})")
            return 0
        if a.stage in GPU_STAGES: return run_gpu_stage(a.stage, [])
        if a.next and a.gpu:
            for s in GPU_STAGES:
                if gpu_status(s) == "not landed": return run_gpu_stage(s, [])
            print("every GPU stage has landed"); return 0
        clock = Clock(parse_budget(a.budget))
        if a.recipes:
            import dsprites_curves
            known = (*dsprites_curves.DSPRITES, *dsprites_curves._pilots())
            bad = sorted(set(a.recipes.split(",")) - set(known))
            if bad: raise CampaignError(f"--recipes: unknown {bad}; the dSprites recipes (and pilots) are {', '.join(known)}")
            dsprites_curves.ONLY = tuple(a.recipes.split(","))
        todo = [a.stage] if a.stage else [s for s in STAGES if led.get(s, {}).get("status") != "ok"]
        for s in todo:
            st = run_stage(s, clock)
            print(f"stage {s}: {st}", flush=True)
            if st != "ok": return 0
        return 0
    except CampaignError as e:
        print(f"campaign: {e}", file=sys.stderr); return 2


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"): signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # `--list | head`: no traceback
    sys.exit(main())
