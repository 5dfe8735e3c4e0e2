"""The GPU machine's checks, for a GPU held for a short time (a cluster job's time limit, a notebook service that
disconnects): stages of at most 9 minutes, one command each, each packing what it returns into one archive of a small
results folder.

    python3 tools/gpu_campaign.py --list                       # the stages, in order, with what each runs
    python3 tools/gpu_campaign.py --stage bench                # one stage on the GPU (results: results/gpu_campaign/)
    python3 tools/gpu_campaign.py --next                       # the first stage not done yet
    python3 tools/gpu_campaign.py --all --device cpu --tiny    # every stage end to end on a CPU (smoke scale): a rehearsal
    python3 tools/gpu_campaign.py --wheels                     # download the wheels the GPU machine lacks into .whl/
    python3 tools/gpu_campaign.py --unpack                     # GPU results into the checkout (tables)

Stages: `contact` (tools/first_contact.py: every objective's GPU path, one line each, in under 5 minutes), `tests` (the
CUDA tests: every test marked to skip without CUDA), `bench` (benchmarks/bench_gpu.py: the measured throughput table).
The papers' `gpu` reproductions are the campaign's stages `gpu-PAPER` (`python3 -m disentbook campaign --stage
gpu-dipvae --budget 9m`, then `--pack $OUT`; here `--unpack DIR`): they go on from call to call, their ledger is the
campaign's. The shipped models are not trained here: the dSprites ones are the campaign's zoo, the others come from
`tools/train_pretrained.py`.

The results folder (`--results`, default results/gpu_campaign) holds at most 8 files of at most 16 MiB, 64 MiB in all,
so that it travels to a GPU machine and back whole: `checks.tar.gz` (contact, tests and bench). Every archive holds
`<stage>/stage.json` (status, device name, torch, seconds, command); a stage is done when its stage.json says `ok`, and
a stage cut short leaves its archive with status `timeout` or `failed` and is run again. Each stage runs under a
9-minute limit (`--limit`), so a job limit or a disconnect loses one stage at most.

On a GPU machine that can reach no package index, the packages it lacks travel as wheels (`--wheels`; README of
benchmarks/ says how to carry them): POT (the contrastive paper's exact optimal transport, `ot.emd`), for the bench's
contrastive rows and the contrastive reproduction; ipywidgets and its dependencies only for the CUDA test of the widgets
(without them that file is reported as not collected).

Across machines: `--unpack` lands a stage's results in the checkout and records the stage in the committed ledger
`benchmarks/gpu_campaign.json`; a later run's `--next` / `--all` skip the stages listed there.

A GPU stage without a GPU (and without `--device cpu`) is a one-line error saying what to do (exit status 2).
"""
from __future__ import annotations
import argparse, datetime, io, json, os, platform, shutil, subprocess, sys, tarfile, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("contact", "tests", "bench")
ARCHIVE = {"contact": "checks", "tests": "checks", "bench": "checks"}
LIMIT_S = 9 * 60                       # one stage, one command
LEDGER = ROOT / "benchmarks" / "gpu_campaign.json"     # stages landed in the checkout by earlier runs (committed)
MAX_FILES, MAX_FILE, MAX_TOTAL = 8, 16 * 2**20, 64 * 2**20
# packages the GPU image lacks, as pip names
WHEELS_REQUIRED = ("POT",)
WHEELS_OPTIONAL = ("ipywidgets", "comm", "ipython", "ipython-pygments-lexers", "traitlets", "widgetsnbextension",
                   "jupyterlab-widgets", "decorator", "jedi", "parso", "matplotlib-inline", "pexpect", "ptyprocess",
                   "prompt-toolkit", "wcwidth", "stack-data", "executing", "asttokens", "pure-eval")
WHEEL_DIR = ".whl"
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                   "manylinux1_x86_64")
WHAT = {"contact": "tools/first_contact.py: every objective in its own process, strict, bf16, a K = 2 ensemble and a captured single",
        "tests": "python -m pytest tests (only the tests that skip without CUDA)",
        "bench": "python benchmarks/bench_gpu.py (writes the measured throughput table)"}


class CampaignError(Exception):
    "A one-line error for the user (exit status 2)."


def pytest_collection_modifyitems(config, items):
    "As a pytest plugin (`-p gpu_campaign`): keep only the tests marked to skip without CUDA."
    keep = [it for it in items if any(m.name == "skipif" and "cuda" in str(m.kwargs.get("reason", "")).lower()
                                      for m in it.iter_markers())]
    config.hook.pytest_deselected(items=[it for it in items if it not in keep])
    items[:] = keep


# ---------------------------------------------------------------- the results folder
def archive_path(results: Path, stage: str) -> Path:
    return Path(results) / f"{ARCHIVE[stage]}.tar.gz"


def read_archive(path: Path) -> dict:
    "{member name: bytes} of an archive (empty when it does not exist)."
    if not Path(path).is_file(): return {}
    with tarfile.open(path, "r:gz") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def write_archive(path: Path, files: dict):
    "Write {name: bytes} as a gzipped tar, atomically."
    path = Path(path); path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as t:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name); info.size = len(data); info.mtime = int(time.time())
            t.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)


def stage_record(results: Path, stage: str) -> dict | None:
    "The stage.json of `stage` in the results folder, or None."
    raw = read_archive(archive_path(results, stage)).get(f"{stage}/stage.json")
    return json.loads(raw) if raw else None


def read_ledger(path) -> dict:
    "The stages `--unpack` landed in the checkout in earlier runs (stage -> its stage.json); {} without a ledger."
    if path is None: return {}
    try: d = json.loads(Path(path).read_text())
    except FileNotFoundError: return {}
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path} is not readable JSON ({type(e).__name__}); restore it with git checkout") from None
    return d.get("stages", {}) if isinstance(d, dict) and isinstance(d.get("stages", {}), dict) else {}


def landed(ledger, stage: str) -> dict | None:
    "The ledger's record of `stage` when it landed from a GPU run (never a CPU rehearsal), else None."
    r = read_ledger(ledger).get(stage)
    return r if isinstance(r, dict) and r.get("status") == "ok" and not r.get("tiny") else None


def done(results: Path, stage: str, ledger=None) -> bool:
    "Done in this results folder, or landed in the checkout by an earlier run (the ledger): a later run goes on."
    r = stage_record(results, stage)
    return (bool(r) and r.get("status") == "ok") or landed(ledger, stage) is not None


def check_limits(results: Path):
    "The results folder must travel: at most 8 files, each <= 16 MiB, <= 64 MiB in all."
    files = [p for p in Path(results).iterdir() if p.is_file()] if Path(results).is_dir() else []
    if len(files) > MAX_FILES: raise CampaignError(f"{results} holds {len(files)} files; at most {MAX_FILES} travel")
    big = [f"{p.name} ({p.stat().st_size / 2**20:.1f} MiB)" for p in files if p.stat().st_size > MAX_FILE]
    if big: raise CampaignError(f"{', '.join(big)} in {results}: over {MAX_FILE // 2**20} MiB")
    total = sum(p.stat().st_size for p in files)
    if total > MAX_TOTAL: raise CampaignError(f"{results} holds {total / 2**20:.1f} MiB; at most {MAX_TOTAL // 2**20} travel")


# ---------------------------------------------------------------- environment
def device_name(device: str) -> str:
    import torch
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"cpu: {platform.processor() or platform.machine()} (torch {torch.__version__}, {os.cpu_count()} cores)"


def require_gpu(stage: str, device: str):
    import torch
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CampaignError(f"stage {stage!r} needs a CUDA GPU and none is visible here; run it on the GPU machine "
                            "(benchmarks/README.md, 'GPU campaign'), or rehearse it on a CPU with --device cpu --tiny")


def run(cmd: list[str], log: list[str], limit: float, env: dict | None = None) -> tuple[int, float]:
    "Run `cmd` (in the checkout) under `limit` seconds; its output appended to `log`; (return code, seconds)."
    t0 = time.perf_counter()
    e = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]), **(env or {}))
    log.append("$ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=max(limit, 1))
        log.append(p.stdout[-20_000:] + p.stderr[-20_000:]); rc = p.returncode
    except subprocess.TimeoutExpired as x:
        out = (x.stdout or b"") + (x.stderr or b"")
        log.append((out.decode(errors="replace") if isinstance(out, bytes) else out)[-20_000:] + f"\n[stopped at the {limit:.0f} s limit]")
        rc = 124
    return rc, time.perf_counter() - t0


# ---------------------------------------------------------------- the stages
def stage_contact(a, work: Path, log: list) -> tuple[int, dict]:
    out = work / "first_contact.json"
    cmd = [sys.executable, "tools/first_contact.py", "--out", str(out), "--device", a.device]
    cmd += ["--steps", "2", "--batch", "8", "--only", "beta_vae", "cvae", "--jobs", "1"] if a.tiny else []
    rc, _ = run(cmd, log, min(a.remaining(), 5 * 60))
    return rc, ({"contact/first_contact.json": out.read_bytes()} if out.exists() else {})


def stage_tests(a, work: Path, log: list) -> tuple[int, dict]:
    junit = work / "junit.xml"
    # only the files with CUDA tests: the others may import what the GPU machine lacks (nbformat, ipywidgets)
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py") if "cuda.is_available()" in p.read_text())
    rc, _ = run([sys.executable, "-m", "pytest", *files, "-p", "gpu_campaign", "--continue-on-collection-errors", "-q",
                 "-rs", "-p", "no:cacheprovider", f"--junitxml={junit}"], log, a.remaining())
    files = {"tests/junit.xml": junit.read_bytes()} if junit.exists() else {}
    return (0 if rc in (0, 5) else rc), files                # 5: nothing collected (no CUDA test in this checkout)


def stage_bench(a, work: Path, log: list) -> tuple[int, dict]:
    out = work / "throughput.json"
    cmd = [sys.executable, "benchmarks/bench_gpu.py", "--out", str(out)]
    cmd += ["--device", "cpu", "--tiny"] if a.tiny else ["--device", a.device]
    rc, _ = run(cmd, log, a.remaining())
    return rc, ({"bench/throughput.json": out.read_bytes()} if out.exists() else {})


def run_stage(a, stage: str) -> dict:
    "Run one stage, pack its archive into the results folder (and `--out`), return its stage.json."
    if not a.device.startswith("cpu"): require_gpu(stage, a.device)
    a.device_name = device_name(a.device)
    t0 = time.perf_counter()
    a.remaining = lambda: max(a.limit - (time.perf_counter() - t0), 1)
    log = []
    with tempfile.TemporaryDirectory(prefix=f"campaign_{stage}_") as tmp:
        work = Path(tmp)
        fn = {"contact": stage_contact, "tests": stage_tests, "bench": stage_bench}.get(stage)
        rc, files = fn(a, work, log)
    seconds = time.perf_counter() - t0
    status = "ok" if rc == 0 else "timeout" if rc == 124 else "failed"
    rec = dict(stage=stage, status=status, returncode=rc, device=a.device_name, tiny=bool(a.tiny), seconds=round(seconds, 1),
               limit_s=a.limit, finished=f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
               command=f"python3 tools/gpu_campaign.py --stage {stage}" + (" --device cpu --tiny" if a.tiny else ""),
               files=sorted(files))
    files[f"{stage}/stage.json"] = (json.dumps(rec, indent=1) + "\n").encode()
    files[f"{stage}/log.txt"] = "\n".join(log)[-200_000:].encode()
    path = archive_path(a.results, stage)
    keep = {k: v for k, v in read_archive(path).items() if not k.startswith(f"{stage}/")}   # tests and bench share one
    write_archive(path, keep | files)
    if a.out is not None and Path(a.out).resolve() != Path(a.results).resolve():
        Path(a.out).mkdir(parents=True, exist_ok=True); shutil.copy2(path, Path(a.out) / path.name)
    check_limits(a.results)
    print(f"stage {stage}: {status} in {seconds:.0f} s on {a.device_name} -> {path} ({path.stat().st_size / 2**20:.2f} MiB)",
          flush=True)
    if status != "ok": print("\n".join(log)[-3000:], flush=True)
    return rec


def unpack(a) -> int:
    "Put what the GPU stages returned into the checkout: the throughput table, the CUDA tests' results, the first contact."
    n, ledger = 0, read_ledger(a.ledger)
    for stage in STAGES:
        rec = stage_record(a.results, stage)
        if not rec or rec.get("tiny"): continue                                   # a CPU rehearsal never lands in the checkout
        if ledger.get(stage, {}).get("finished") == rec.get("finished"):         # landed before: what the checkout made of it
            print(f"{stage}: landed earlier ({rec.get('finished')}), left as it is in the checkout"); continue
        if rec["status"] != "ok": continue
        for name, data in read_archive(archive_path(a.results, stage)).items():
            top, _, rel = name.partition("/")
            if top != stage or rel in ("stage.json", "log.txt") or rel.startswith("histories/"): continue
            dest = (ROOT / "benchmarks" / "throughput.json" if rel == "throughput.json" else
                    ROOT / "benchmarks" / "gpu_tests_junit.xml" if rel == "junit.xml" else
                    ROOT / "benchmarks" / "first_contact.json" if rel == "first_contact.json" else None)
            if dest is None: continue
            for d in [dest] + ([ROOT / "disentbook" / "assets" / "throughput.json"] if rel == "throughput.json" else []):
                d.parent.mkdir(parents=True, exist_ok=True); d.write_bytes(data); n += 1   # the table also ships in the package
                print(f"{stage}: {d.relative_to(ROOT)}")
    if n and a.ledger is not None: write_ledger(a)
    print(f"{n} files unpacked from {a.results}" if n else f"nothing to unpack in {a.results} (no GPU stage done)")
    return 0


def _write_ledger_file(path, stages: dict):
    body = dict(note="GPU campaign stages that landed in this checkout (tools/gpu_campaign.py --unpack); a stage listed "
                     "here is done: --next and --all go on with the others, --redo runs it again. The papers' gpu "
                     "reproductions are the campaign's stages (benchmarks/campaign.json).", stages=stages)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(body, indent=1) + "\n")


def write_ledger(a):
    "Record every GPU stage that landed (its stage.json, when it was unpacked) in the ledger the next run reads."
    stages = read_ledger(a.ledger)
    now = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    for stage in STAGES:
        rec = stage_record(a.results, stage)
        if rec and rec["status"] == "ok" and not rec.get("tiny"):
            stages[stage] = {k: v for k, v in rec.items() if k != "files"} | dict(unpacked=now)
    _write_ledger_file(a.ledger, stages)
    print(f"ledger: {Path(a.ledger)} ({', '.join(stages)})")


def wheels(a) -> int:
    "Download the wheels the GPU machine lacks (the versions installed here) into .whl/."
    from importlib import metadata
    names = list(WHEELS_REQUIRED) + (list(WHEELS_OPTIONAL) if a.optional else [])
    pins = []
    for n in names:
        try: pins.append(f"{n}=={metadata.version(n)}")
        except metadata.PackageNotFoundError: pins.append(n)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", a.python,
           "--implementation", "cp", *[x for p in WHEEL_PLATFORMS for x in ("--platform", p)], "-d", str(ROOT / WHEEL_DIR), *pins]
    print(" ".join(cmd), flush=True)
    return 0 if a.dry_run else subprocess.call(cmd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--stage", choices=STAGES, help="run one stage")
    ap.add_argument("--next", action="store_true", help="run the first stage that is not done")
    ap.add_argument("--all", action="store_true", help="run every stage not done yet, in order (a CPU rehearsal)")
    ap.add_argument("--list", action="store_true", help="list the stages and whether each is done")
    ap.add_argument("--wheels", action="store_true", help="pip download the wheels the GPU machine lacks into .whl/")
    ap.add_argument("--unpack", action="store_true", help="put the GPU stages' results into the checkout (throughput table, "
                                                          "the CUDA tests' results, the first contact)")
    ap.add_argument("--optional", action="store_true", help="with --wheels: also ipywidgets and its dependencies")
    ap.add_argument("--python", default="3.12", help="with --wheels: the GPU machine's Python version")
    ap.add_argument("--dry-run", action="store_true", help="with --wheels: print the command only")
    ap.add_argument("--device", default="cuda", help="cuda (the campaign) or cpu (a rehearsal)")
    ap.add_argument("--tiny", action="store_true", help="smoke scale and tiny settings (with --device cpu: CI)")
    ap.add_argument("--results", default=str(ROOT / "results" / "gpu_campaign"), help="the results folder")
    ap.add_argument("--out", help="also copy the stage's archive here (on the GPU machine: $OUT)")
    ap.add_argument("--limit", type=float, default=LIMIT_S, help="seconds one stage may take")
    ap.add_argument("--redo", action="store_true", help="run a stage again even when it is done")
    ap.add_argument("--ledger", default=str(LEDGER), help="the committed record of stages landed by earlier runs "
                                                          "('' for none): those stages are done")
    a = ap.parse_args(argv)
    a.results = Path(a.results)
    a.ledger = Path(a.ledger) if a.ledger else None
    try:
        if a.wheels: return wheels(a)
        if a.unpack: return unpack(a)
        if a.list:
            for s in STAGES:
                r, l = stage_record(a.results, s), landed(a.ledger, s)
                state = f"{r['status']} ({r['seconds']:.0f} s on {r['device']})" if r else \
                    f"landed ({l['seconds']:.0f} s on {l['device']}, {l.get('finished', '')})" if l else "not run"
                print(f"{s:<12} {state:<60} {WHAT[s]}")
            return 0
        if a.device.startswith("cpu") and not a.tiny:
            raise CampaignError("--device cpu runs the tiny rehearsal only: add --tiny (its numbers say nothing about a GPU)")
        ledger = None if a.tiny else a.ledger          # a rehearsal rehearses every stage, whatever landed from a GPU
        todo = [a.stage] if a.stage else [s for s in STAGES if a.redo or not done(a.results, s, ledger)]
        if a.next: todo = todo[:1]
        elif not (a.stage or a.all):
            raise CampaignError("say what to run: --stage NAME, --next or --all (--list shows the stages)")
        if a.stage and done(a.results, a.stage, ledger) and not a.redo:
            where = archive_path(a.results, a.stage) if done(a.results, a.stage) else f"landed earlier: {a.ledger}"
            print(f"stage {a.stage} is done ({where}); --redo runs it again"); return 0
        bad = 0
        for s in todo: bad += run_stage(a, s)["status"] != "ok"
        if not todo: print("every stage is done")
        return 1 if bad else 0
    except CampaignError as e:
        print(f"gpu_campaign.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
