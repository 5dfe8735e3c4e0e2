"""Training throughput of β-VAE (β = 4) on 64×64 dSprites, batch 64: disentbook's Trainer at its defaults (precision
'auto': bf16 autocast and channels-last weights on a CPU with native bf16, bf16 on CUDA, fp32 elsewhere) and at fp32,
against a bare fp32 PyTorch loop of the same model, objective and data (and the same loop with the trainer's bf16 recipe:
autocast, channels-last weights on a CPU), measured in one run (interleaved repeats). `--compile` adds both bare loops
with the forward pass and loss through `torch.compile` (default mode; its compilation is in the warm-up, not timed).
`--isa` instead times the two bare loops on the CPU in fresh processes under oneDNN's instruction set as the CPU has it
and capped by `ONEDNN_MAX_CPU_ISA` (AVX-512 without its bf16 extensions; AVX2), the way a CPU without them computes: what
bf16 costs where it is emulated (a run keeps the precision it began in, wherever it goes on). `--processes` instead times
the trainer in fp32 with channels-last weights (the CPU campaign's settings) as one process on every core, then as one
single-threaded process per core all at once: the images/s a machine gives independent runs either way; with
`--paper NAME`, each headline row of that reproduction's `cpu` scale (its model, objective, sampler and batch, fp32):
seconds per step either way and the machine's steps per second in processes over one process. `--processes --paper NAME
--precision-ratio` times each row the way the CPU campaign's curves train it (one single-threaded process per core at
once, the row's layout as `campaign.papers.CHANNELS_LAST` says) in fp32 and in bf16 autocast, interleaved: the seconds
per step of each and bf16's speed over fp32's.

    python benchmarks/bench_trainer.py [--steps 150] [--repeats 3] [--device cpu|cuda] [--compile | --isa | --processes [--paper NAME [--precision-ratio]]]

Every loop indexes the same uint8 image tensor (a materialised subset of procedural dSprites) on the device, uses the
same Adam, and runs the same number of steps after a warm-up; the trainer logs every 50 steps (its only host
synchronisation). Prints images/s of each and the ratios trainer / bare fp32.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

import torch

from disentbook.core import default_device, make_generator, to_float_images
from disentbook.data.dsprites import DSprites
from disentbook.data.samplers import SingleSampler
from disentbook.nets import VAE
from disentbook.training.config import TrainConfig, resolve_precision
from disentbook.training.trainer import Trainer
from disentbook.objectives.vae import BetaVAE, gaussian_kl


def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize()


def bare_loop(images, steps, batch, dev, seed=0, bf16=False, compile=False):
    """The reference: a plain fp32 loop (no autocast, default memory format); `bf16`: the same with the trainer's bf16 recipe;
    `compile`: the forward pass and loss through `torch.compile`."""
    torch.manual_seed(seed)
    model = VAE().to(dev)
    if bf16 and dev.type == "cpu": model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = make_generator(seed, dev)
    def loss_of(x):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(x)
            return model.nll(out["x_out"].float(), x).mean() + 4.0 * gaussian_kl(out["mu"].float(), out["logvar"].float()).sum(1).mean()
    if compile: loss_of = torch.compile(loss_of)
    def step():
        i = torch.randint(len(images), (batch,), generator=g, device=dev)
        loss = loss_of(to_float_images(images[i]))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    for _ in range(10): step()
    sync(dev); t = time.perf_counter()
    for _ in range(steps): step()
    sync(dev); return steps * batch / (time.perf_counter() - t)


def trainer_loop(data, steps, batch, dev, precision, seed=0, channels_last=None):
    torch.manual_seed(seed)
    sampler = SingleSampler(data, device=dev)
    tr = Trainer(VAE().to(dev), BetaVAE(4.0), sampler, TrainConfig(steps=10 + steps, batch_size=batch, lr=1e-4, seed=seed,
                 device=str(dev), precision=precision, log_every=50, progress=False, channels_last=channels_last))
    tr.fit(10); sync(dev); t = time.perf_counter()
    tr.fit(steps); sync(dev); return steps * batch / (time.perf_counter() - t)


ISAS = (("as the CPU has it", None), ("AVX-512 without bf16", "AVX512_CORE"), ("AVX2", "AVX2"))

def isa_rows(a) -> None:
    "`--isa`: the bare fp32 and bf16 loops in a fresh process per instruction set (`--bare-only` in the child)."
    print(f"bare loops on the CPU, batch {a.batch}, {a.steps} timed steps x {a.repeats} repeats, one process per instruction set")
    for label, isa in ISAS:
        env = dict(os.environ, **({"ONEDNN_MAX_CPU_ISA": isa} if isa else {}))
        r = subprocess.run([sys.executable, __file__, "--bare-only", "--device", "cpu", "--steps", str(a.steps),
                            "--repeats", str(a.repeats), "--batch", str(a.batch), "--subset", str(a.subset)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0: print(f"{label}: failed ({r.stderr.strip().splitlines()[-1:]})"); continue
        d = json.loads(r.stdout.strip().splitlines()[-1]); f, b = statistics.median(d["fp32"]), statistics.median(d["bf16"])
        print(f"{label:22s} fp32 {f:7.1f}  bf16 {b:7.1f} images/s (medians)  bf16 / fp32 {b / f:.2f}x   "
              f"(repeats: fp32 {', '.join(f'{v:.0f}' for v in d['fp32'])}; bf16 {', '.join(f'{v:.0f}' for v in d['bf16'])})")


def paper_rows(name: str) -> dict:
    """{row slug: its first job} of reproduction `name` at the `cpu` scale, on the CPU; before its learning curves chose
    the `cpu` length, the `cpu` scale's rows at the `quick` settings (what the curves train)."""
    from disentbook.core import InputError
    from disentbook.repro.declare import PAPERS
    from disentbook.repro.plan import paper_jobs
    first = {}
    try: jobs = paper_jobs(name, "cpu", device="cpu")[1]
    except InputError:
        rows = set(PAPERS[name].scales["cpu"]["only"]["rows"])
        jobs = [j for j in paper_jobs(name, "quick", device="cpu")[1] if j["spec"]["slug"] in rows]
    for j in jobs: first.setdefault(j["spec"]["slug"], j)
    return first


def paper_seconds_per_step(name: str, slug: str, steps: int, precision: str = "fp32", campaign_layout: bool = False) -> float:
    """Seconds per step of row `slug`'s trainer (`repro.runs.build_trainer`, in `precision`, nothing written) after 10
    warm-up steps; `campaign_layout`: the conv weights' layout as the campaign's curves set it (`campaign.papers.CHANNELS_LAST`)."""
    from disentbook.repro.runs import build_trainer
    job = paper_rows(name)[slug]
    opts = {**job.get("options", {}), "precision": precision}
    if campaign_layout:
        from disentbook.campaign.papers import CHANNELS_LAST
        opts["channels_last"] = CHANNELS_LAST.get(name)
    with tempfile.TemporaryDirectory() as d:
        tr, _, _ = build_trainer(dict(job, out=d, progress=False, options=opts), steps=10**6)
        tr.out_dir = None                                   # no checkpoint inside the timed steps
        tr.fit(10); t = time.perf_counter(); tr.fit(steps)
        return (time.perf_counter() - t) / steps


def process_rows(a) -> None:
    """`--processes`: the trainer (fp32, channels-last) in fresh processes, one on every core (torch's threads = cores), then
    one single-threaded process per core started together (`--trainer-only THREADS` in the children); repeats interleaved."""
    cores = os.cpu_count() or 1
    if a.paper: return paper_process_rows(a, cores)
    print(f"trainer fp32 channels-last on the CPU, batch {a.batch}, {a.steps} timed steps, {cores} cores, "
          f"{a.repeats} interleaved repeats")
    start = lambda threads: start_child(a, threads)
    together, apart = [], []
    for r in range(a.repeats):
        together.append(rate(start(cores)))
        apart.append(sum(rate(p) for p in [start(1) for _ in range(cores)]))
        print(f"  repeat {r}: one process x {cores} threads {together[-1]:8.1f} img/s   "
              f"{cores} processes x 1 thread {apart[-1]:8.1f} img/s in all", flush=True)
    t, s = statistics.median(together), statistics.median(apart)
    print(f"median images/s: one process x {cores} threads {t:.1f}, {cores} processes x 1 thread {s:.1f} in all; ratio {s / t:.2f}x")


def start_child(a, threads: int, slug: str | None = None, precision: str | None = None):
    "A fresh process timing the trainer on `threads` threads (`--trainer-only`): the β-VAE's images/s, or row `slug`'s seconds per step."
    row = ["--paper", a.paper, "--row", slug] if slug else []
    if slug and precision: row += ["--child-precision", precision]
    return subprocess.Popen([sys.executable, __file__, "--trainer-only", str(threads), "--device", "cpu", "--steps",
                             str(a.steps), "--batch", str(a.batch), "--subset", str(a.subset), *row],
                            env=dict(os.environ, OMP_NUM_THREADS=str(threads)), stdout=subprocess.PIPE, text=True)


def rate(p) -> float:
    "What a child printed last (JSON), or the benchmark stops with its exit status."
    out, _ = p.communicate()
    if p.returncode != 0: raise SystemExit(f"a child process failed (exit {p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def precision_rows(a, cores: int) -> None:
    """`--processes --paper NAME --precision-ratio`: each cpu row as one single-threaded process per core at once (the
    campaign's curves), in fp32 and then in bf16, repeats interleaved; seconds per step of each process, medians, ratio."""
    from disentbook.core import cpu_native_bf16
    print(f"{a.paper} cpu rows, {cores} single-threaded processes at once, the campaign's layout, {a.steps} timed steps, "
          f"{a.repeats} interleaved repeats (seconds per step of each process); this CPU "
          f"{'has' if cpu_native_bf16() else 'has no'} native bf16")
    for slug in paper_rows(a.paper):
        got = {"fp32": [], "bf16": []}
        for r in range(a.repeats):
            for prec in got:
                got[prec] += [rate(p) for p in [start_child(a, 1, slug, prec) for _ in range(cores)]]
            print(f"  {slug:32s} repeat {r}: fp32 {', '.join(f'{v:.4f}' for v in got['fp32'][-cores:])}; "
                  f"bf16 {', '.join(f'{v:.4f}' for v in got['bf16'][-cores:])}", flush=True)
        f, b = statistics.median(got["fp32"]), statistics.median(got["bf16"])
        print(f"{slug}: median seconds per step fp32 {f:.4f}, bf16 {b:.4f}; bf16's steps per second {f / b:.2f}x fp32's", flush=True)


def paper_process_rows(a, cores: int) -> None:
    "`--processes --paper NAME`: each cpu row's seconds per step as one process on every core and as one process per core at once."
    if a.precision_ratio: return precision_rows(a, cores)
    print(f"{a.paper} cpu rows, fp32, {a.steps} timed steps, {cores} cores, {a.repeats} interleaved repeats (seconds per step)")
    for slug in paper_rows(a.paper):
        gains = []
        for r in range(a.repeats):
            one = rate(start_child(a, cores, slug))
            each = [rate(p) for p in [start_child(a, 1, slug) for _ in range(cores)]]
            gains.append(sum(1 / s for s in each) * one)
            print(f"  {slug:32s} repeat {r}: one process x {cores} threads {one:.4f}; {cores} processes x 1 thread "
                  f"{', '.join(f'{s:.4f}' for s in each)}; the machine's steps/s {gains[-1]:.2f}x", flush=True)
        print(f"{slug}: median {statistics.median(gains):.2f}x", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=150); p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=64); p.add_argument("--device")
    p.add_argument("--subset", type=int, default=4, help="keep every SUBSET-th position (smaller materialised set)")
    p.add_argument("--compile", action="store_true", help="also the bare loops through torch.compile")
    p.add_argument("--isa", action="store_true", help="the bare loops under each oneDNN instruction set (CPU)")
    p.add_argument("--processes", action="store_true",
                   help="the trainer as one process on every core against one single-threaded process per core (CPU)")
    p.add_argument("--bare-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--paper", help="with --processes: the cpu rows of this reproduction instead of the β-VAE")
    p.add_argument("--precision-ratio", action="store_true",
                   help="with --processes --paper: each row in fp32 and in bf16, single-threaded processes (the campaign's curves)")
    p.add_argument("--trainer-only", type=int, help=argparse.SUPPRESS); p.add_argument("--row", help=argparse.SUPPRESS)
    p.add_argument("--child-precision", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.precision_ratio and not (a.processes and a.paper): p.error("--precision-ratio goes with --processes --paper NAME")
    if a.isa: return isa_rows(a)
    if a.processes: return process_rows(a)
    dev = default_device(a.device)
    if a.trainer_only:
        torch.set_num_threads(a.trainer_only)
        if a.paper:
            prec = a.child_precision or "fp32"
            return print(json.dumps(paper_seconds_per_step(a.paper, a.row, a.steps, prec, campaign_layout=bool(a.child_precision))))
        data = DSprites().subset(posX=range(0, 32, a.subset), posY=range(0, 32, a.subset)).to(dev)
        return print(json.dumps(trainer_loop(data, a.steps, a.batch, dev, "fp32", channels_last=True)))
    if a.bare_only:
        images = DSprites().subset(posX=range(0, 32, a.subset), posY=range(0, 32, a.subset)).images
        got = {"fp32": [], "bf16": []}
        for r in range(a.repeats):
            for k in got: got[k].append(bare_loop(images, a.steps, a.batch, dev, seed=r, bf16=k == "bf16"))
        return print(json.dumps(got))
    auto, why = resolve_precision("auto", dev)
    data = DSprites().subset(posX=range(0, 32, a.subset), posY=range(0, 32, a.subset)).to(dev)
    print(f"device {dev}, torch {torch.__version__}, threads {torch.get_num_threads()}, trainer default precision {auto} "
          f"({why}), {len(data):,} images materialised, batch {a.batch}, {a.steps} timed steps x {a.repeats} repeats")
    rows = {"bare fp32": [], "bare bf16": [], "trainer fp32": [], f"trainer auto ({auto})": []}
    if a.compile: rows |= {"bare fp32 compiled": [], "bare bf16 compiled": []}
    for r in range(a.repeats):  # interleave so every loop sees the same machine state
        rows["bare fp32"].append(bare_loop(data.images, a.steps, a.batch, dev, seed=r))
        rows["bare bf16"].append(bare_loop(data.images, a.steps, a.batch, dev, seed=r, bf16=True))
        rows["trainer fp32"].append(trainer_loop(data, a.steps, a.batch, dev, "fp32", seed=r))
        rows[f"trainer auto ({auto})"].append(trainer_loop(data, a.steps, a.batch, dev, "auto", seed=r))
        if a.compile:
            rows["bare fp32 compiled"].append(bare_loop(data.images, a.steps, a.batch, dev, seed=r, compile=True))
            rows["bare bf16 compiled"].append(bare_loop(data.images, a.steps, a.batch, dev, seed=r, bf16=True, compile=True))
        print(f"  repeat {r}: " + "   ".join(f"{k} {v[-1]:8.1f} img/s" for k, v in rows.items()), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    b = med["bare fp32"]
    print("median images/s: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    print("ratio to the bare fp32 loop: " + ", ".join(f"{k} {v / b:.2f}x" for k, v in med.items() if k != "bare fp32"))


if __name__ == "__main__":
    main()
