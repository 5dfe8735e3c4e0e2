"""First contact with a new GPU: every registered objective, each in its own process, through the engine's GPU path.

    python3 tools/first_contact.py                          # on CUDA: every objective, strict, bf16 (one line each)
    python3 tools/first_contact.py --only beta_vae cvae     # some objectives
    python3 tools/first_contact.py --device cpu --steps 4   # a rehearsal on a CPU (CPU bf16 autocast, eager steps)

For each objective, on its own default dataset (small versions of it: the point is the step, not the data), with the
model it declares at the width the reproductions use (hidden 256), at bf16 and with `strict=True` (a fallback to a
slower path is an error, not a warning):

- a vmapped ensemble of K = 2 members (seeds 0 and 1), captured as one CUDA graph where its step allows;
- a single model through `training.fit.fit_single` (a `CapturedStep`), captured;
- each member saving its checkpoint at the end, as every run does.

Each objective runs in a fresh process (a failed capture, a CUDA error or a hang cannot spoil the next one) under a
time limit, and prints one line: the ensemble's and the single model's mode, wall seconds, final loss, or the first
line of the error. `--out` keeps the lines as JSON. The exit status is 1 when any objective failed. Meant to run first
on a GPU the project has not met (`tools/gpu_campaign.py --stage contact`), before the CUDA tests and the benchmarks.
"""
from __future__ import annotations
import argparse, json, math, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# small versions of each default dataset: enough images for a few batches
SMALL = dict(grassy=dict(per_digit=40, n_background=400), digit_style=dict(n_reference=200, n_unlabelled=200, n_probe=40),
             digits=dict(n=512))


def _first_line(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return s[0][:300] if s else type(e).__name__


def small_setup(name: str, hidden: int = 256) -> tuple:
    """(default dataset name, a small version of it, its sampler kind, the model config) of objective `name`: the model it
    declares at FC width `hidden` (what `one` trains, and what the CPU stand-in tests probe)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DISENTBOOK_OFFLINE", "1")
    import torch
    import disentbook  # noqa: F401  (registers everything)
    from disentbook.data.training_sets import TRAINING_SETS, build_dataset, image_shape
    from disentbook.jobs import build_model_for
    from disentbook.objectives.base import OBJECTIVES, default_dataset
    cls, ds = OBJECTIVES[name], default_dataset(name)
    data = build_dataset(ds, SMALL.get(ds, {}))
    if ds == "dsprites": data = data.subset(orientation=range(0, 40, 10), posX=range(0, 32, 2), posY=range(0, 32, 2))
    with torch.random.fork_rng(devices=[]):
        model_config = build_model_for(cls.model_kind, image_shape(data), cls.default_latent_dim, hidden=hidden).config
    return ds, data, TRAINING_SETS[ds].sampler, model_config


def one(name: str, device: str, steps: int, batch: int, precision: str, hidden: int = 256) -> dict:
    "Train `name` as a K = 2 ensemble and as a captured single model; what happened, as a dict (never raises)."
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DISENTBOOK_OFFLINE", "1")
    import torch
    import disentbook  # noqa: F401  (registers everything)
    from disentbook.training.fit import fit_ensemble, fit_single
    from disentbook.training.run import run_specs
    from disentbook.training.replay import NotReplayableError
    from disentbook.data.training_sets import make_sampler
    from disentbook.training.config import TrainConfig
    rec = dict(objective=name, device=device, precision=precision, steps=steps, batch=batch, hidden=hidden)
    try:
        ds, data, kind, model_config = small_setup(name, hidden)
        config = TrainConfig(steps=steps, batch_size=batch, lr=5e-4, seed=0, device=device, precision=precision,
                             log_every=max(steps // 2, 1), progress=False)
        sampler = lambda dev: make_sampler(data, kind, dev, materialize=True)
        rec["dataset"] = ds
    except Exception as e:
        return rec | dict(status="failed", where="setup", error=_first_line(e))
    ok, tmp = True, Path(tempfile.mkdtemp(prefix="first_contact_"))      # each member saves its checkpoint, as runs do
    for what in ("ensemble", "single"):
        t0 = time.perf_counter()
        try:
            members = [dict(objective=name, params={}, seed=s, out_dir=tmp / f"{what}-{s}") for s in (0, 1)]
            if what == "ensemble":
                try: res = fit_ensemble(run_specs(members, model_config, config), data, device=device, precision=precision, strict=True, sampler=sampler)
                except NotReplayableError as e:   # as the harness plans it: its runs train as captured singles
                    rec[what] = dict(status="ok", mode="not vmappable", why=_first_line(e), seconds=round(time.perf_counter() - t0, 2))
                    continue
            else:
                res = [fit_single(run_specs([members[0]], model_config, config)[0], data, device=device, capture=True, precision=precision, strict=True, sampler=sampler)]
            if device.startswith("cuda"): torch.cuda.synchronize()
            loss = [float(r["final"].get("loss", float("nan"))) for r in res]
            bad = [r.get("status") for r in res if r.get("status") != "ok"] or \
                  [f"no checkpoint in {Path(m['out_dir']).name}" for m in members[:len(res)] if not (m["out_dir"] / "checkpoint").exists()] or \
                  (["non-finite loss"] if not all(math.isfinite(x) for x in loss) else [])
            rec[what] = dict(mode=res[0].get("mode"), why=res[0].get("why"), seconds=round(time.perf_counter() - t0, 2),
                             loss=[round(x, 4) for x in loss], precision=res[0].get("precision"),
                             fallback=res[0].get("fallback"), status="ok" if not bad else "failed: " + ", ".join(map(str, bad)))
            ok &= not bad
        except Exception as e:
            rec[what] = dict(status="failed", seconds=round(time.perf_counter() - t0, 2), error=_first_line(e))
            ok = False
    shutil.rmtree(tmp, ignore_errors=True)
    return rec | dict(status="ok" if ok else "failed")


def line(r: dict) -> str:
    "One line of the summary for objective result `r`."
    def part(w):
        x = r.get(w)
        if not x: return f"{w}: -"
        if x.get("error"): return f"{w}: FAILED {x['error']}"
        if x.get("mode") == "not vmappable": return f"{w}: not vmappable ({x['why'].split(': ', 2)[-1][:60]}...)"
        return f"{w}: {x.get('mode')} {x.get('seconds')} s loss {x.get('loss')}" + ("" if x["status"] == "ok" else f" {x['status']}")
    head = f"{r['objective']:<22} {r.get('status', '?'):<6}"
    if r.get("where") == "setup": return f"{head} setup: {r.get('error')}"
    return f"{head} {part('ensemble')} | {part('single')}"


def child(name: str, a) -> dict:
    "Run `one(name)` in a fresh process under the time limit; its result (a failure record on a crash or timeout)."
    cmd = [sys.executable, __file__, "--child", name, "--device", a.device, "--steps", str(a.steps),
           "--batch", str(a.batch), "--precision", a.precision]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return dict(objective=name, status="failed", where="setup", error=f"no answer within {a.timeout} s")
    last = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode == 0 and last: return json.loads(last[-1]) | dict(wall=round(time.perf_counter() - t0, 1))
    err = [l for l in p.stderr.splitlines() if l.strip()]
    return dict(objective=name, status="failed", where="setup", error=f"process exited {p.returncode}: {err[-1] if err else ''}"[:300])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", nargs="+", help="these objectives (default: every registered one)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--jobs", type=int, default=4, help="objectives at a time (each its own process)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per objective")
    ap.add_argument("--out", help="write the results here as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(one(a.child, a.device, a.steps, a.batch, a.precision)), flush=True)
        return 0
    sys.path.insert(0, str(ROOT))
    import torch
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA GPU is visible here; first contact is for a GPU (`--device cpu` rehearses it on a CPU)",
              file=sys.stderr)
        return 2
    import disentbook  # noqa: F401
    from disentbook.objectives.base import OBJECTIVES
    names = a.only or sorted(OBJECTIVES)
    unknown = [n for n in names if n not in OBJECTIVES]
    if unknown:
        print(f"error: unknown objective(s) {', '.join(unknown)}; registered: {', '.join(sorted(OBJECTIVES))}", file=sys.stderr)
        return 2
    dev = torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu"
    print(f"first contact on {dev}, torch {torch.__version__}, {a.precision}, strict, K = 2 ensemble + captured single, "
          f"{a.steps} steps of {a.batch}", flush=True)
    t0, results = time.perf_counter(), []
    with ThreadPoolExecutor(max(a.jobs, 1)) as pool:
        for r in pool.map(lambda n: child(n, a), names):
            results.append(r)
            print(line(r), flush=True)
    failed = [r["objective"] for r in results if r.get("status") != "ok"]
    print(f"{len(results) - len(failed)} of {len(results)} objectives ok in {time.perf_counter() - t0:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(dict(device=dev, torch=torch.__version__, precision=a.precision, steps=a.steps,
                                               batch=a.batch, results=results), indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
