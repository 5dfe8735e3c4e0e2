"""Fault injection for the trainer's checkpoints: kill -9 at random instants, truncated and bit-flipped
checkpoints, a data folder that cannot be written. Prints counts; exits 1 if any fault went wrong.

    python benchmarks/faults.py                 # N=20 kills per method (beta_vae, factor_vae, tcwae_gan)
    python benchmarks/faults.py --n 5 --steps 30 --json faults.json

Per method: one uninterrupted reference run; then N runs, each killed (SIGKILL) at a random instant of its
training (saves every `--ckpt-every` steps, so many kills land inside a save), the folder inspected (the
checkpoint, if any, must load and verify), and the run restarted (resume from the checkpoint, or from scratch
with the same seed when none was written yet) to the end: its final weights, optimizer states and history must be
bit-identical to the reference. Then `--corrupt` truncations and bit flips of the reference checkpoint (state
file and config.json) must each be refused with a `CorruptFileError`. The model is tiny (a 28x28 conv VAE,
4 latents) on one CPU thread; each killed run is a forked process (torch already imported, so a kill costs no
interpreter start-up) killed with SIGKILL; restarts run in this process.
"""
from __future__ import annotations
import argparse, json, os, random, shutil, signal, sys, tempfile, time, warnings
from pathlib import Path

METHODS = ("beta_vae", "factor_vae", "tcwae_gan")
PARAMS = dict(beta_vae=dict(beta=4.0), factor_vae=dict(gamma=10.0, latent_dim=4, disc_hidden=32, disc_depth=2),
              tcwae_gan=dict(beta=10.0, gamma=5.0, latent_dim=4, disc_hidden=32, disc_depth=2))


# ---------------------------------------------------------------- one training run (also used by tests/test_faults.py)
def build(method: str, seed: int = 0):
    "Seed first, then build the tiny model and the objective of `method`."
    from disentbook.core import seed_everything
    from disentbook.nets import VAE
    from disentbook.objectives.base import make_objective
    seed_everything(seed)
    return VAE(image_size=28, channels=1, latent_dim=4, hidden=32), make_objective(method, **PARAMS[method])

def sampler():
    from disentbook.data.digits import load_digits
    from disentbook.data.samplers import SingleSampler
    return SingleSampler(load_digits("embedded", n=256, seed=0), device="cpu")

def train(method: str, out_dir, steps: int = 40, ckpt_every: int = 2, seed: int = 0, ready=None):
    "Train `method` into `out_dir`, resuming from `out_dir/checkpoint` when there is one; returns the trainer."
    import torch
    from disentbook.training.config import TrainConfig
    from disentbook.training.trainer import Trainer
    torch.set_num_threads(1)
    out = Path(out_dir); ck = out / "checkpoint"
    model, objective = build(method, seed)
    if (ck / "config.json").exists():
        trainer = Trainer.resume(ck, sampler(), model=model, objective=objective, out_dir=out)
    else:
        cfg = TrainConfig(steps=steps, batch_size=16, lr=1e-3, seed=seed, log_every=4, ckpt_every=ckpt_every,
                          device="cpu", progress=False)
        trainer = Trainer(model, objective, sampler(), cfg, out_dir=out)
    if ready: ready()
    return trainer.fit()

def final_state(out_dir) -> dict:
    "The tensors that must match bit for bit: model, objective, optimizers (via the verified checkpoint), history."
    from disentbook.training.checkpoints import load_checkpoint
    return load_checkpoint(Path(out_dir) / "checkpoint")["state"]

def same_state(a: dict, b: dict) -> bool:
    "Bit-identical nested state (tensors compared with torch.equal, RNG states included)."
    import torch
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b

def _child(method: str, out_dir, steps: int, ckpt_every: int, ready, die_at_replace: int = 0):
    "The training process: signal `ready` once set up, then train; optionally SIGKILL itself at its k-th os.replace."
    if die_at_replace:
        real, n = os.replace, [0]
        def replace(*a, **k):
            n[0] += 1
            if n[0] == die_at_replace: os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        os.replace = replace
    train(method, out_dir, steps, ckpt_every, ready=ready.set)
    os._exit(0)


# ---------------------------------------------------------------- the fault campaigns
def run_killed(method: str, out_dir, steps: int, ckpt_every: int, delay: float | None = None,
               die_at_replace: int = 0) -> bool:
    """Train in a forked process (torch already imported: no start-up cost) and SIGKILL it `delay` seconds after it is
    set up (or let it kill itself at its `die_at_replace`-th os.replace); True when it died by SIGKILL."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_child, args=(method, out_dir, steps, ckpt_every, ready, die_at_replace))
    p.start()
    if delay is not None:
        if not ready.wait(timeout=600): p.kill(); raise RuntimeError("the training process did not start")
        time.sleep(delay)
        if p.is_alive(): os.kill(p.pid, signal.SIGKILL)
    p.join()
    if p.exitcode not in (0, -signal.SIGKILL): raise RuntimeError(f"the training process failed (exit {p.exitcode})")
    return p.exitcode == -signal.SIGKILL

def run_to_end(method: str, out_dir, steps: int, ckpt_every: int) -> float:
    "Train (or resume) to the end in this process; returns the seconds of training proper."
    t = {}
    train(method, out_dir, steps, ckpt_every, ready=lambda: t.setdefault("start", time.perf_counter()))
    return time.perf_counter() - t["start"]

def inspect_run_dir(out_dir) -> str:
    "'none' (no checkpoint yet), 'ok' (loads and verifies) or 'BROKEN: ...'; notes leftovers of a save in progress."
    from disentbook.core import DisentbookError
    from disentbook.training.checkpoints import load_checkpoint, read_checkpoint_config
    ck = Path(out_dir) / "checkpoint"
    if not (ck / "config.json").exists(): return "none"
    try: load_checkpoint(ck); read_checkpoint_config(ck)
    except DisentbookError as e: return f"BROKEN: {e}"
    return "ok"

def leftovers(out_dir) -> bool:
    "True when a save was interrupted: temporary files or a state file not named by config.json."
    ck = Path(out_dir) / "checkpoint"
    if not ck.is_dir(): return any(p.name.endswith(".part") for p in Path(out_dir).glob(".*"))
    names = {p.name for p in ck.iterdir()}
    try: keep = json.loads((ck / "config.json").read_text())["state_file"]
    except (OSError, ValueError, KeyError): keep = None
    return any(n.endswith(".part") for n in names) or any(n.startswith("state") and n != keep for n in names)

def kill_campaign(method: str, n: int, steps: int, ckpt_every: int, work: Path, rng: random.Random) -> dict:
    ref = work / f"{method}-ref"
    seconds = run_to_end(method, ref, steps, ckpt_every)
    reference = final_state(ref)
    c = dict(method=method, kills=0, finished_before_kill=0, no_checkpoint_yet=0, checkpoint_ok=0, broken=0,
             killed_inside_save=0, resumed_identical=0, resumed_different=0, reference_seconds=round(seconds, 2))
    for i in range(n):
        d = work / f"{method}-{i}"
        killed = run_killed(method, d, steps, ckpt_every, rng.uniform(0, seconds))
        c["kills" if killed else "finished_before_kill"] += 1
        state = inspect_run_dir(d)
        if state == "none": c["no_checkpoint_yet"] += 1
        elif state == "ok": c["checkpoint_ok"] += 1
        else: c["broken"] += 1; print(f"  {method} #{i}: {state}")
        c["killed_inside_save"] += leftovers(d)
        run_to_end(method, d, steps, ckpt_every)
        c["resumed_identical" if same_state(final_state(d), reference) else "resumed_different"] += 1
        shutil.rmtree(d)
    return c

def corruption_campaign(method: str, m: int, work: Path, rng: random.Random) -> dict:
    "Truncate / flip one bit of the reference checkpoint `m` times each: every load must be a CorruptFileError."
    from disentbook.core import CorruptFileError
    from disentbook.training.checkpoints import load_checkpoint, read_checkpoint_config
    src = work / f"{method}-ref" / "checkpoint"
    name = read_checkpoint_config(src)["state_file"]
    c = dict(method=method, truncated=0, state_bit_flips=0, config_bit_flips=0, clear_errors=0, silent_loads=0,
             other_errors=0)
    for kind in ("truncated", "state_bit_flips", "config_bit_flips"):
        for _ in range(m):
            ck = work / "corrupt"; shutil.rmtree(ck, ignore_errors=True); shutil.copytree(src, ck)
            f = ck / ("config.json" if kind == "config_bit_flips" else name)
            raw = bytearray(f.read_bytes())
            if kind == "truncated": raw = raw[:rng.randrange(len(raw))]
            else: raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            f.write_bytes(bytes(raw)); c[kind] += 1
            model, objective = build(method)
            try: load_checkpoint(ck, model, objective)
            except CorruptFileError as e: c["clear_errors" if str(ck) in str(e) else "other_errors"] += 1
            except Exception as e:                      # noqa: BLE001 - counted, not hidden
                c["other_errors"] += 1; print(f"  {method} {kind}: {type(e).__name__}: {e}")
            else: c["silent_loads"] += 1
    return c

def readonly_campaign(work: Path) -> dict:
    "A data folder that cannot be written: warned before rendering, images still right."
    import torch
    from disentbook.data.dsprites import DSprites
    c = dict(cases=0, warned_before_render=0, images_right=0)
    cases = [("file in the way", None)]
    if os.geteuid() != 0: cases.append(("read-only folder", 0o555))
    expected = DSprites("procedural").subset(shape=[0], scale=[0], orientation=[0, 1]).images
    for label, mode in cases:
        root = work / f"data-{c['cases']}"
        if mode is None: root.write_text("a file where the data folder should be")
        else: root.mkdir(); root.chmod(mode)
        seen = []
        real = DSprites._render
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            DSprites._render = lambda self, f: seen.append(len(w)) or real(self, f)
            try: im = DSprites("procedural", root=root, cache=True).subset(shape=[0], scale=[0], orientation=[0, 1]).images
            finally: DSprites._render = real
        c["cases"] += 1
        c["warned_before_render"] += bool(seen) and min(seen) >= 1 and "DISENTBOOK_DATA" in str(w[0].message)
        c["images_right"] += torch.equal(im, expected)
        if mode is not None: root.chmod(0o755)
    return c


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=20, help="random kill -9 points per method (default 20)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--steps", type=int, default=40, help="training steps per run (default 40)")
    p.add_argument("--ckpt-every", type=int, default=2, help="steps between checkpoints (default 2)")
    p.add_argument("--corrupt", type=int, default=10, help="truncations and bit flips per kind and method (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill instants and corruptions")
    p.add_argument("--json", help="also write the counts to this JSON file")
    args = p.parse_args(argv)
    if args.n < 1 or args.steps < 1 or args.ckpt_every < 1 or args.corrupt < 0:
        p.error("--n, --steps and --ckpt-every must be >= 1, --corrupt >= 0")
    import torch
    torch.set_num_threads(1)
    rng, t0 = random.Random(args.seed), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="disentbook-faults-") as tmp:
        work = Path(tmp)
        kills = []
        for m in args.methods:
            kills.append(kill_campaign(m, args.n, args.steps, args.ckpt_every, work, rng)); print(kills[-1], flush=True)
        corrupt = [corruption_campaign(m, args.corrupt, work, rng) for m in args.methods]
        for c in corrupt: print(c)
        ro = readonly_campaign(work); print(ro)
    result = dict(args=vars(args), kills=kills, corruption=corrupt, readonly=ro, seconds=round(time.perf_counter() - t0, 1))
    bad = (sum(k["broken"] + k["resumed_different"] for k in kills) + sum(c["silent_loads"] + c["other_errors"] for c in corrupt)
           + (ro["cases"] - ro["warned_before_render"]) + (ro["cases"] - ro["images_right"]))
    print(f"{'ALL FAULTS HANDLED' if bad == 0 else f'{bad} FAULT(S) MISHANDLED'} in {result['seconds']} s")
    if args.json: Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))      # run from a checkout without installing
    sys.exit(main())
