"""GPU throughput of the harness's real training path, written to the plan's throughput table.

    python benchmarks/bench_gpu.py                              # on CUDA: measure, write benchmarks/throughput.json
    python benchmarks/bench_gpu.py --device cpu --tiny          # anywhere: a tiny run that exercises every path (CI)
    python benchmarks/bench_gpu.py --ks 8 32 64 128 --repeats 5 --window 500
    python benchmarks/bench_gpu.py --merge bf16.json fp32.json --out benchmarks/throughput.json   # runs of one GPU, one table

What it measures, each as aggregate images/s (median of `--repeats` timed windows, with min and max):

- the data: the dSprites sampler the harness builds for its dSprites papers (64x64, on the device on CUDA), the model
  the harness builds (`repro.harness.default_model`: conv64 VAE, Bernoulli decoder, 10 latents), batch 64 per model;
- two methods: beta-VAE (beta = 4) and FactorVAE (gamma = 35, its MLP discriminator trained by its own Adam);
- four modes: a bare eager PyTorch loop (beta-VAE only: the reference the ratios divide by), the `Trainer`'s eager
  step (what `runner='local'` runs), the captured single model (`CapturedStep`) and vmapped, captured ensembles
  of K members (`Ensemble`, K = `--ks`);
- two precisions, each compared only with itself: strict fp32 (TF32 off for matmuls and convolutions, forward and
  backward) and bf16 autocast (the harness's default on CUDA);
- the other papers' families (`--papers`, default contrastive, invariance, refvae): one row per model family of
  their gpu plans, built as the harness builds the run (data, sampler, model, objective, batch size), in the mode
  the plan predicts (a captured single model, or the Trainer's eager step where no step can be captured);
- the harness's cadence: a window of `--window` steps holds one read-back of the logged terms (log_every = window);
  a checkpoint (the harness writes one every max(steps // 10, 1000) steps: `--ckpt-every`, default 2000, the
  vae/dipvae gpu runs') is timed separately (K single-model saves for an ensemble) and its share added to the window.

The rows (family, mode, group size, precision, images/s) go to `benchmarks/throughput.json` on CUDA, with the device's
name, torch version, date and command (`repro.plan` reads them); the bare loop goes under `reference`. A CPU run (or
`--tiny`) writes `results/bench_gpu/throughput-<device>.json` instead and never replaces the committed table: its
numbers say nothing about a GPU. Targets on one H100: captured single >= 3x the bare eager fp32 loop;
ensembles >= 300,000 images/s aggregate.
"""
from __future__ import annotations
import argparse, contextlib, datetime, json, os, statistics, sys, tempfile, time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))                      # the checkout's disentbook, installed or not

import disentbook  # noqa: E402,F401  (registers everything)
from disentbook.training.captured import CapturedStep
from disentbook.core import default_device, make_generator, to_float_images  # noqa: E402
from disentbook.data.dsprites import DSprites  # noqa: E402
from disentbook.data.samplers import SingleSampler  # noqa: E402
from disentbook.objectives.vae import gaussian_kl  # noqa: E402
from disentbook.repro.declare import PAPERS  # noqa: E402
from disentbook.repro.runs import default_model, group_jobs, objective_params, sampler_fn, setup_job, train_data  # noqa: E402
from disentbook.repro import plan as P  # noqa: E402
from disentbook.training.config import TrainConfig  # noqa: E402
from disentbook.training.ensemble import Ensemble
from disentbook.training.run import RunSpec, build_run, run_specs

METHODS = {"beta_vae": dict(beta=4.0), "factor_vae": dict(gamma=35.0)}
TABLE = ROOT / "benchmarks" / "throughput.json"


@contextlib.contextmanager
def flags(precision: str, dev: torch.device):
    "Strict fp32 (TF32 off) or bf16 for the whole step: `training.config.precision_flags` when the engine has it, else the same flags."
    pf = getattr(__import__("disentbook.training.config", fromlist=["precision_flags"]), "precision_flags", None)
    if pf is not None:
        with pf(precision, dev): yield
        return
    b = torch.backends
    old = b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.benchmark
    try:
        if dev.type == "cuda": b.cudnn.benchmark = True
        if precision == "fp32": b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = False
        yield
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.benchmark = old


def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize(dev)


def harness_sampler(data, dev):
    "The sampler the reproductions train dSprites papers with (`repro.runs.sampler_fn`)."
    return sampler_fn(PAPERS["vae"], data)(dev)


def model_config(data) -> dict:
    "The model the harness builds for the vae / dipvae / tcwae papers on dSprites."
    with torch.random.fork_rng(devices=[]):
        return default_model(dict(objective="beta_vae", params={}), data, dict(model=dict(latent_dim=10))).config


def stats(xs: list[float]) -> dict:
    return dict(images_per_s=statistics.median(xs), min=min(xs), max=max(xs), repeats=[round(x, 1) for x in xs])


class Bench:
    def __init__(self, a, dev):
        self.a, self.dev = a, dev
        self.data = DSprites()
        self.sampler = harness_sampler(self.data, dev)
        self.mc = model_config(self.data)
        self.tmp = Path(tempfile.mkdtemp(prefix="bench_gpu_"))
        self.save_s: dict = {}

    def config(self, precision: str) -> TrainConfig:
        a = self.a
        return TrainConfig(steps=10**9, batch_size=a.batch, lr=5e-4, log_every=a.window, ckpt_every=0, device=str(self.dev),
                           amp=precision == "bf16" and self.dev.type == "cuda", progress=False)

    def trainers(self, method: str, k: int, precision: str, out: bool = False) -> list:
        return [build_run(run_specs([dict(objective=method, params=METHODS[method], seed=i,
                                      out_dir=(self.tmp / f"{method}-{i}") if out else None)], self.mc, self.config(precision))[0], self.sampler, data=self.data, device=self.dev, resume=False)
                for i in range(k)]

    def ckpt_seconds(self, method: str, precision: str) -> float:
        "Seconds of one single-model checkpoint (weights, optimizers, history; fsync; atomic replace), median of 3."
        key = (method, precision)
        if key not in self.save_s:
            t = self.trainers(method, 1, precision, out=True)[0]
            with flags(precision, self.dev): t.fit(2)
            xs = []
            for _ in range(3):
                sync(self.dev); t0 = time.perf_counter(); t.save(); sync(self.dev); xs.append(time.perf_counter() - t0)
            self.save_s[key] = statistics.median(xs)
        return self.save_s[key]

    def timed(self, obj, k: int, precision: str, method: str, batch: int | None = None, ckpt: bool = True) -> dict:
        "Warm-up (and capture), then `repeats` windows of `window` steps; images/s with the checkpoint share added."
        a, batch = self.a, batch or self.a.batch
        with flags(precision, self.dev):
            obj.fit(a.warm); sync(self.dev)
            xs, raw = [], []
            ckpt = self.ckpt_seconds(method, precision) * k * a.window / a.ckpt_every if ckpt else 0.0
            for _ in range(a.repeats):
                t0 = time.perf_counter(); obj.fit(a.window); sync(self.dev); dt = time.perf_counter() - t0
                raw.append(a.window * batch * k / dt); xs.append(a.window * batch * k / (dt + ckpt))
        return stats(xs) | dict(without_checkpoints=statistics.median(raw))

    def paper_rows(self, name: str, precision: str) -> list[dict]:
        """One row per model family of paper `name`'s gpu plan that the dSprites rows do not cover (smoke with --tiny):
        its first run built as the harness builds it (data, sampler, model, objective, batch size), in the mode the plan
        predicts (a captured single model, or the Trainer's eager step where no step can be captured); a group whose steps
        need a host stage (`Objective.prepare`: the contrastive Eq. 8's exact OT plan) gets a row of its own, marked."""
        a, dev = self.a, self.dev
        paper, jobs, _ = P.paper_jobs(name, "smoke" if a.tiny else "gpu", device=str(dev))
        out, seen = [], set()
        for g in group_jobs(jobs, device=str(dev)):
            key = (g["family"], g["mode"] == "eager", bool(g.get("host_stage")))
            if key in seen: continue                                          # one row per family, mode and host stage
            seen.add(key)
            j = jobs[g["jobs"][0]]
            _, cfg, data, mc = setup_job(j)
            batch = 8 if a.tiny else int(cfg["train"]["batch_size"])
            conf = TrainConfig(steps=10**9, batch_size=batch, lr=float(cfg["train"].get("lr", 1e-3)), log_every=a.window,
                               ckpt_every=0, device=str(dev), amp=precision == "bf16" and dev.type == "cuda", progress=False)
            eager = g["mode"] == "eager"
            run = RunSpec(j["spec"]["objective"], objective_params(j["spec"], cfg), mc, conf)          # seed 0, no output
            def make(eager=eager, run=run, data=data):
                t = build_run(run, sampler_fn(paper, data)(dev), data=train_data(data), device=dev, resume=False)
                return t if eager else CapturedStep(t, capture=dev.type == "cuda", precision=precision)
            r = self.row(run.objective, "eager" if eager else "captured_single", 1, precision, make,
                         family=g["family"], batch=batch, paper=name)
            if g.get("host_stage"): r["host_stage"] = True                    # e.g. Eq. 8's exact OT plan before each step
            out.append(r)
        return out

    def bare(self, precision: str) -> dict:
        "A bare eager loop: the harness's sampler, the same model, beta-VAE loss, Adam (fused on CUDA)."
        a, dev = self.a, self.dev
        torch.manual_seed(0)
        from disentbook.nets import build_model
        model = build_model(self.mc).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=5e-4, **(dict(fused=True) if dev.type == "cuda" else {}))
        g = make_generator(0, dev)
        def step():
            x = self.sampler.sample(a.batch, g)["x"]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16" and dev.type == "cuda"):
                out = model(x)
                loss = model.nll(out["x_out"].float(), x).mean() + 4.0 * gaussian_kl(out["mu"].float(), out["logvar"].float()).sum(1).mean()
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        xs = []
        with flags(precision, dev):
            for _ in range(a.warm): step()
            for _ in range(a.repeats):
                sync(dev); t0 = time.perf_counter()
                for _ in range(a.window): step()
                sync(dev); xs.append(a.window * a.batch / (time.perf_counter() - t0))
        return stats(xs)

    def row(self, method: str, mode: str, k: int, precision: str, make, family: str | None = None, batch: int | None = None,
            paper: str | None = None) -> dict:
        fam = family or P.family(self.mc, method, METHODS[method])
        r = dict(family=fam, method=method, mode=mode, group_size=k, precision=precision)
        if paper: r |= dict(paper=paper, batch_size=batch, checkpoints="not included")
        if self.dev.type == "cuda": torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(self.dev); m0 = torch.cuda.memory_allocated(self.dev)
        try:
            obj = make()
            r |= self.timed(obj, k, precision, method, batch, ckpt=paper is None)
            r["engine_mode"] = getattr(obj, "mode", "trainer")
            if r["engine_mode"] == "eager" and mode == "captured_single":   # a capture that fell back: an eager figure
                r["planned_mode"], r["mode"] = mode, "eager"
            if getattr(obj, "reason", None): r["why"] = str(obj.reason)
            if self.dev.type == "cuda": r["memory_per_member_mib"] = round((torch.cuda.max_memory_allocated(self.dev) - m0) / k / 2**20, 1)
            del obj
        except Exception as e:                               # one failed configuration is reported, the others still run
            r |= dict(images_per_s=None, error=f"{type(e).__name__}: {e}".splitlines()[0][:300])
        print(f"  {method:<10} {mode:<18} K={k:<4} {precision:<5} "
              + (f"{r['images_per_s']:>12,.0f} images/s (min {r['min']:,.0f}, max {r['max']:,.0f})" if r["images_per_s"]
                 else f"FAILED {r['error']}"), flush=True)
        return r


def merge(paths: list[str], out: str) -> int:
    """One table from tables measured in separate runs on the same GPU (say, bf16 in one run and fp32 in another, to fit
    a job's time limit): rows, failures and reference loops together, each run's command kept."""
    ts = [json.loads(Path(p).read_text()) for p in paths]
    devs = {t["device"] for t in ts}
    if len(devs) != 1 or any(t.get("tiny") or not t.get("measured") for t in ts):
        print(f"bench_gpu.py: error: --merge takes measured GPU tables of one device; got {sorted(devs)}", file=sys.stderr)
        return 2
    keys = lambda r: (r["family"], r["method"], r["mode"], r["group_size"], r["precision"])
    rows = {}
    for t in ts:
        for r in t["rows"]: rows[keys(r)] = r                          # a later table's row replaces an earlier one
    m = dict(ts[0]) | dict(rows=list(rows.values()), failed=[r for t in ts for r in t.get("failed", [])],
                           reference=[r for t in ts for r in t.get("reference", [])],
                           partial=any(t.get("partial") for t in ts), seconds=round(sum(t.get("seconds", 0) for t in ts), 1),
                           date=max(t.get("date") or "" for t in ts), command=" ; ".join(t["command"] for t in ts),
                           window_steps=sorted({t.get("window_steps") for t in ts}), repeats=sorted({t.get("repeats") for t in ts}))
    Path(out).write_text(json.dumps(m, indent=1) + "\n")
    print(f"{len(m['rows'])} rows from {len(ts)} tables -> {out}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", help="cuda (default when present) or cpu")
    ap.add_argument("--tiny", action="store_true", help="a tiny setting (batch 8, 2-step windows, K = 2): exercises every path")
    ap.add_argument("--window", type=int, default=250, help="steps per timed window (= log_every: one log read each)")
    ap.add_argument("--warm", type=int, default=5, help="warm-up steps before timing (capture happens here)")
    ap.add_argument("--repeats", type=int, default=3, help="timed windows per configuration (median, min, max)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ks", type=int, nargs="+", default=[8, 32, 64], help="ensemble sizes")
    ap.add_argument("--ckpt-every", type=int, default=2000, help="the harness's checkpoint cadence, in steps")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--papers", nargs="*", default=["contrastive", "invariance", "refvae"],
                    help="also one row per model family of these papers' gpu plans (the families the dSprites rows miss)")
    ap.add_argument("--out", help="where the table goes (default: benchmarks/throughput.json on CUDA, "
                                  "results/bench_gpu/throughput-<device>.json otherwise)")
    ap.add_argument("--merge", nargs="+", metavar="TABLE", help="merge tables measured in separate runs into --out (no measuring)")
    a = ap.parse_args(argv)
    if a.merge: return merge(a.merge, a.out or str(TABLE))
    dev = default_device(a.device)
    if a.device is None and dev.type != "cuda" and not a.tiny:
        ap.exit(2, "bench_gpu.py: error: no CUDA device here; run it on a GPU, or pass --device cpu --tiny to exercise it\n")
    if a.tiny: a.window, a.warm, a.repeats, a.batch, a.ks = 2, 1, 2, 8, [2]
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; batch {a.batch}; windows of {a.window} steps x {a.repeats}; "
          f"checkpoint every {a.ckpt_every} steps" + ("; TINY: these numbers say nothing about a GPU" if a.tiny or dev.type != "cuda" else ""),
          flush=True)
    t_start = time.perf_counter()
    out = Path(a.out) if a.out else TABLE if dev.type == "cuda" and not a.tiny else \
        ROOT / "results" / "bench_gpu" / f"throughput-{dev.type}.json"
    b = Bench(a, dev)
    cap = dev.type == "cuda"
    rows, reference = [], []

    def table(partial: bool) -> dict:
        return dict(format=1, device=name, measured=True, tiny=bool(a.tiny or dev.type != "cuda"), partial=partial,
                    source=f"measured by benchmarks/bench_gpu.py on {name}",
                    date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), torch=torch.__version__,
                    command="python benchmarks/bench_gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
                    batch_size=a.batch, window_steps=a.window, repeats=a.repeats, ckpt_every=a.ckpt_every,
                    reference_family=P.family(b.mc, "beta_vae", METHODS["beta_vae"]),
                    note="images/s aggregate over the group's members; median of the repeats (min, max beside it); the "
                         "checkpoint share at ckpt_every is included ('without_checkpoints' leaves it out); precisions are "
                         "strict fp32 (TF32 off) and bf16 autocast; the plan uses the bf16 rows (the harness's CUDA default)",
                    seconds=round(time.perf_counter() - t_start, 1), rows=[r for r in rows if r.get("images_per_s")],
                    failed=[r for r in rows if not r.get("images_per_s")], reference=reference)

    def save(partial: bool = True):
        "Written after every row, so that a run stopped at a time limit still leaves what it measured (partial: true)."
        if not any(r.get("images_per_s") for r in rows): return
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp"); tmp.write_text(json.dumps(table(partial), indent=1) + "\n"); os.replace(tmp, out)

    for prec in a.precisions:
        reference.append(dict(family=P.family(b.mc, "beta_vae", METHODS["beta_vae"]), method="beta_vae", mode="bare eager loop",
                              group_size=1, precision=prec) | b.bare(prec))
        print(f"  beta_vae   bare eager loop    K=1    {prec:<5} {reference[-1]['images_per_s']:>12,.0f} images/s", flush=True)
        for m in a.methods:
            rows.append(b.row(m, "eager", 1, prec, lambda: b.trainers(m, 1, prec)[0])); save()
            rows.append(b.row(m, "captured_single", 1, prec,
                              lambda: CapturedStep(b.trainers(m, 1, prec)[0], capture=cap, precision=prec))); save()
            for k in a.ks:
                rows.append(b.row(m, "captured_ensemble", k, prec,
                                  lambda: Ensemble(b.trainers(m, k, prec), capture=cap, precision=prec))); save()
        for paper in a.papers if prec == a.precisions[-1] else ():    # at the plan's precision only (bf16 by default)
            rows.extend(b.paper_rows(paper, prec)); save()
    ok = [r for r in rows if r.get("images_per_s")]
    print("\nratios (each precision against itself; captured / bare eager loop; target >= 3 for fp32 on an H100):")
    for prec in a.precisions:
        base = next(r["images_per_s"] for r in reference if r["precision"] == prec)
        for r in ok:
            if r["precision"] == prec:
                print(f"  {r['method']:<10} {r['mode']:<18} K={r['group_size']:<4} {prec:<5} {r['images_per_s'] / base:6.2f}x")
        for m in a.methods:
            ens = sorted((r["group_size"], r["images_per_s"]) for r in ok if r["method"] == m and r["precision"] == prec
                         and r["mode"] == "captured_ensemble")
            stop = next((k for (k0, v0), (k, v) in zip(ens, ens[1:]) if v < 1.1 * v0), None)
            if ens: print(f"  {m} {prec}: best ensemble {max(v for _, v in ens):,.0f} images/s (target >= 300,000); "
                          + (f"throughput stops growing at K = {stop}" if stop else f"still grows at K = {ens[-1][0]}"))
    save(partial=False)
    print(f"\n{len(ok)} rows ({len(rows) - len(ok)} failed) in {time.perf_counter() - t_start:.0f} s -> {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
