"""A paper's reproduction as a campaign stage (`python3 -m disentbook campaign --stage reproduce-PAPER`), on the β-VAE
tutorial's smoke scale: the budget's timer ends it `partial` with its folder unlocked, the next call finishes it with the
same per-run numbers as a call never cut, and a folder holding a report of other settings is refused in one line."""
import json, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the stage `reproduce-refvae` declared as the tutorial's smoke reproduction; the timer's margins off
DRIVER = """
import sys
import disentbook.campaign.reproductions as R
from disentbook.cli import main
R.REPRODUCTIONS["reproduce-refvae"] = R.Reproduction("vae", scale="smoke", why="a test")
R.MARGIN, R.MIN_LEFT = 0.0, 0.0
sys.exit(main(["campaign", *sys.argv[1:]]))
"""


def campaign(root, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", DRIVER, *args, "--root", str(root)], capture_output=True, text=True,
                          env=env, timeout=600)


def status(root) -> str:
    return json.loads((root / "benchmarks" / "campaign.json").read_text())["stages"]["reproduce-refvae"]["status"]


def runs(root) -> dict:
    m = json.loads((root / "reports" / "vae-smoke" / "metrics.json").read_text())
    return {(t, row, i): {k: v for k, v in r.items() if "seconds" not in k and k != "precision_fallback"}
            for t, rows in m["results"].items() for row, seeds in rows.items() for i, r in enumerate(seeds)}


def test_a_reproduction_cut_by_its_budget_goes_on_and_a_folder_of_other_settings_is_refused(tmp_path):
    cut, straight = tmp_path / "cut", tmp_path / "straight"
    r = campaign(cut, "--stage", "reproduce-refvae", "--budget", "1s")
    assert r.returncode == 0 and "stage reproduce-refvae: partial" in r.stdout, (r.stdout[-1500:], r.stderr[-1500:])
    assert status(cut) == "partial" and not (cut / "reports" / "vae-smoke" / ".lock").exists()
    r = campaign(cut, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 0 and status(cut) == "ok", r.stderr[-2000:]
    r = campaign(straight, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 0, r.stderr[-2000:]
    assert runs(cut) == runs(straight)
    r = campaign(cut, "--list")
    assert "reproduce-refvae" in r.stdout and "runs done" in r.stdout
    # a report of another length in the folder: one line, status 2, the report left as it was
    f = straight / "reports" / "vae-smoke" / "metrics.json"
    m = json.loads(f.read_text()); m["config"]["train"]["steps"] += 5; f.write_text(json.dumps(m))
    before = f.read_bytes()
    r = campaign(straight, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "holds another report" in r.stderr, r.stderr[-2000:]
    assert f.read_bytes() == before


def test_the_declared_order_puts_each_reproduction_after_the_curves_its_length_needs():
    from disentbook.campaign.reproductions import REPRODUCTIONS
    from disentbook.campaign.stages import ORDER
    for name, r in REPRODUCTIONS.items():
        assert name in ORDER
        if r.needs_curves: assert ORDER.index(f"curves-{r.paper}-seeds") < ORDER.index(name), name


def test_carry_takes_a_reproductions_live_checkpoints_to_a_clone_and_never_a_reports_runs_away(tmp_path):
    "`--carry` while a reproduction stage is not done: its runs' checkpoints reach a fresh clone; once done, only they leave."
    import shutil
    from disentbook.campaign.ledger import LEDGER, write_stage
    from disentbook.campaign.stages import CARRY_MIN_SECONDS, carry
    from disentbook.checkpoints import write_checkpoint
    root = tmp_path / "repo"; root.mkdir()
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q"); git("config", "user.email", "t@t"); git("config", "user.name", "t")
    def put(rel, text="{}"):
        p = root / rel; p.parent.mkdir(parents=True, exist_ok=True); p.write_text(text); return rel
    def ckpt(d, s):
        cfg = json.loads((write_checkpoint(root / d, b"w", dict(step=1, train_seconds=s)) / "config.json").read_text())
        return [f"{d}/config.json", f"{d}/{cfg['state_file']}"]
    runs = "reports/refvae-cpu/runs/MNIST/srb_vae"
    live = ckpt(f"{runs}/seed0/train/checkpoint", CARRY_MIN_SECONDS + 1)
    ckpt(f"{runs}/seed2/train/checkpoint", CARRY_MIN_SECONDS - 1)                  # too little training to carry
    done = [put(f"{runs}/seed1/eval.json"), put(f"{runs}/seed1/settings.json")]
    write_stage(root / LEDGER, "reproduce-refvae", dict(status="partial"))
    git("add", "-A"); git("commit", "-qm", "first")                                  # a report's run files: not ignored
    base = set(git("ls-files").split())
    assert set(done) <= base and not set(live) & base
    now, old, left = carry(root)
    assert set(live) <= set(now) and not old and not left and not any("seed2" in p for p in now)
    git("commit", "-qm", "carry")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, capture_output=True)
    assert all((clone / p).read_bytes() == (root / p).read_bytes() for p in live + done)
    # the run finished and the stage done: its checkpoint leaves the index (not the disk); the runs' files stay committed
    put(f"{runs}/seed0/eval.json"); git("add", "-A")
    write_stage(root / LEDGER, "reproduce-refvae", dict(status="ok"))
    now, old, left = carry(root)
    assert sorted(old) == sorted(live) and all((root / p).is_file() for p in live)
    assert set(done) | {f"{runs}/seed0/eval.json"} <= set(git("ls-files").split())
