"""The campaign's stages as a user meets them (`python3 -m disentbook campaign`), on a tiny zoo: a stage killed with
SIGKILL in the middle loses at most one chunk and, resumed, ends with the very weights of a run never killed; a run
folder holding a checkpoint of another recipe is refused in one line (status 2) and left as it was; a finished recipe
ships at once into the checkout the campaign works in; a zoo stage outside a checkout leaves the installed package's
models as they were (only `--stage zoo-models`, the campaign's last stage, ships there)."""
import hashlib, json, os, signal, subprocess, sys, time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# the tiny zoo: one curve seed, one length of 30 steps in chunks of 10, measured on 200 images
DRIVER = """
import sys
import disentbook.campaign.zoo as Z
from disentbook.campaign.lengths import LengthRule
from disentbook.cli import main
Z.CHUNK, Z.NUM_POINTS, Z.GRID, Z.CURVE_SEEDS, Z.MORE_SEEDS = 10, 200, (30,), (0,), ()
Z.FVAE = dict(batch_size=16, num_train=20, num_eval=10, num_variance_estimate=200)
Z.RULE = LengthRule(min_seeds=1, min_stop=0)
Z.THREE_SEED_RECIPES = ()
sys.exit(main(["campaign", *sys.argv[1:]]))
"""


def campaign(root, *args, wait=True):
    cmd = [sys.executable, "-c", DRIVER, *args, "--root", str(root)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not wait: return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def step(run: Path) -> int:
    f = run / "checkpoint" / "config.json"
    return json.loads(f.read_text())["step"] if f.is_file() else 0


def digest(folder) -> dict:
    "{file name: sha256} of the files in `folder`."
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).iterdir()) if p.is_file()}


def weights(run: Path) -> dict:
    from disentbook.training.checkpoints import load_model
    return load_model(run / "kept" / "step_30", device="cpu").state_dict()


def test_a_stage_killed_mid_run_resumes_bit_exactly(tmp_path):
    killed, straight = tmp_path / "killed", tmp_path / "straight"
    run = killed / "results" / "campaign" / "zoo" / "beta_vae_b4" / "seed0"
    p = campaign(killed, "--stage", "zoo-beta_vae_b4", "--budget", "10m", wait=False)
    t0 = time.monotonic()
    while step(run) < 10 and p.poll() is None and time.monotonic() - t0 < 300: time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait()
    at_kill = step(run)
    assert 10 <= at_kill < 30, at_kill
    led = json.loads((killed / "benchmarks" / "campaign.json").read_text())["stages"]["zoo-beta_vae_b4"]
    assert led["status"] == "running"                       # a kill leaves the stage marked as entered, not done
    # what --carry would put in git's index: the live run's checkpoint (config and state file) within the budget
    import disentbook.campaign.stages as S
    old = S.CARRY_MIN_SECONDS; S.CARRY_MIN_SECONDS = 0.0
    try:
        keep, left = S.carried_paths(killed)
        assert {p.name for p in keep if p.parent.name == "checkpoint"} >= {"config.json"} and not left, (keep, left)
        keep, left = S.carried_paths(killed, budget=1)
        assert not any(p.parent.name == "checkpoint" for p in keep) and left == [run / "checkpoint"]
    finally: S.CARRY_MIN_SECONDS = old
    r = campaign(killed, "--stage", "zoo-beta_vae_b4", "--budget", "10m")
    assert r.returncode == 0, r.stderr[-2000:]
    steps = [int(s.replace(",", "")) for s in __import__("re").findall(r"seed 0: step ([\d,]+)", r.stdout)]
    assert steps and min(steps) > at_kill, (steps, at_kill)   # went on from the last checkpoint: at most one chunk lost
    assert json.loads((killed / "benchmarks" / "campaign.json").read_text())["stages"]["zoo-beta_vae_b4"]["status"] == "ok"
    r = campaign(straight, "--stage", "zoo-beta_vae_b4", "--budget", "10m")
    assert r.returncode == 0, r.stderr[-2000:]
    a, b = weights(run), weights(straight / run.relative_to(killed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ca = json.loads((killed / "benchmarks/curves/zoo/beta_vae_b4.json").read_text())
    cb = json.loads((straight / "benchmarks/curves/zoo/beta_vae_b4.json").read_text())
    assert ca["seeds"]["0"][0]["mig"] == cb["seeds"]["0"][0]["mig"] and ca["choice"]["steps"] == 30
    # a checkpoint of another recipe in a run folder: one line, status 2, nothing overwritten
    other = straight / "results" / "campaign" / "zoo" / "beta_vae_b1" / "seed0"
    other.parent.mkdir(parents=True)
    import shutil
    shutil.copytree(straight / run.relative_to(killed), other)
    before = digest(other / "checkpoint")
    r = campaign(straight, "--stage", "zoo-beta_vae_b1", "--budget", "10m")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "another recipe" in r.stderr, r.stderr[-2000:]
    assert digest(other / "checkpoint") == before


def test_a_call_ended_by_sigterm_records_its_stage_as_partial(tmp_path):
    "`kill PID` (SIGTERM), as docs/long-runs.md says: the call exits, its stage is `partial` with seconds, and goes on."
    run = tmp_path / "results" / "campaign" / "zoo" / "beta_vae_b4" / "seed0"
    p = campaign(tmp_path, "--stage", "zoo-beta_vae_b4", "--budget", "10m", wait=False)
    t0 = time.monotonic()
    while step(run) < 10 and p.poll() is None and time.monotonic() - t0 < 300: time.sleep(0.05)
    p.send_signal(signal.SIGTERM); p.wait(timeout=120)
    assert p.returncode == 143, p.stderr.read()[-2000:]
    led = json.loads((tmp_path / "benchmarks" / "campaign.json").read_text())["stages"]["zoo-beta_vae_b4"]
    assert led["status"] == "partial" and led["seconds"] >= 0 and "finished" in led, led
    from disentbook.classroom.pretrained import PRETRAINED_DIR
    installed = digest(PRETRAINED_DIR)
    r = campaign(tmp_path, "--stage", "zoo-beta_vae_b4", "--budget", "10m")
    assert r.returncode == 0 and "zoo-beta_vae_b4: ok" in r.stdout, r.stderr[-2000:]
    # done outside a checkout: the stage says how to ship it and the installed package's models stay as they were
    assert "`python3 -m disentbook campaign --stage zoo-models` ships it" in r.stdout and digest(PRETRAINED_DIR) == installed


def test_a_finished_recipe_ships_at_once_in_a_checkout(tmp_path):
    """In a checkout (it has `disentbook/assets/pretrained`) a zoo stage that ends `ok` ships its recipe there and writes
    the index of the shipped models, without waiting for `zoo-models`; a second call ships nothing again."""
    models = tmp_path / "disentbook" / "assets" / "pretrained"
    models.mkdir(parents=True)
    r = campaign(tmp_path, "--stage", "zoo-beta_vae_b4", "--budget", "10m")
    assert r.returncode == 0 and "beta_vae_b4: shipped seed 0 at 30 steps" in r.stdout, r.stderr[-2000:]
    card = json.loads((models / "beta_vae_b4.json").read_text())
    assert card["command"] == "python3 -m disentbook campaign --stage zoo-beta_vae_b4" and card["train"]["steps"] == 30
    assert card["dtype"] == "float16" and (models / "beta_vae_b4.pt").is_file()
    assert "| `beta_vae_b4` |" in (tmp_path / "reports" / "pretrained" / "README.md").read_text()
    before = digest(models)
    r = campaign(tmp_path, "--stage", "zoo-beta_vae_b4", "--budget", "10m")
    assert r.returncode == 0 and "shipped seed" not in r.stdout and digest(models) == before, r.stdout[-2000:]


def test_the_documented_commands_run_as_written(tmp_path):
    "docs/long-runs.md's `python3 -m disentbook campaign --list`, `--pause`, `--go-on` in a checkout, and a bad stage."
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = lambda *a: subprocess.run([sys.executable, "-m", "disentbook", "campaign", *a], cwd=tmp_path, capture_output=True,
                                    text=True, env=env, timeout=120)
    r = run("--list")
    assert r.returncode == 0 and "zoo-beta_tcvae" in r.stdout and "curves-contrastive-seeds" in r.stdout, r.stderr
    assert run("--pause").returncode == 0 and (tmp_path / "results" / "campaign" / "PAUSE").is_file()
    assert run("--go-on").returncode == 0 and not (tmp_path / "results" / "campaign" / "PAUSE").exists()
    r = run("--stage", "zoo-nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown stage" in r.stderr
    assert "python3 -m disentbook campaign --list" in (ROOT / "docs" / "long-runs.md").read_text()


def test_the_index_of_the_shipped_models_is_generated_from_their_cards(tmp_path):
    """reports/pretrained/README.md is what `campaign.models.write_index` makes of the package's cards and the declared
    pilots' committed records (the commentary kept)."""
    import shutil
    from disentbook.campaign.models import FIGURES, write_index
    from disentbook.campaign.zoo import CURVES
    from disentbook.classroom.pretrained import PRETRAINED_DIR
    committed = ROOT / FIGURES / "README.md"
    (tmp_path / FIGURES).mkdir(parents=True)
    shutil.copy(committed, tmp_path / FIGURES / "README.md")
    shutil.copytree(ROOT / CURVES / "pilots", tmp_path / CURVES / "pilots")
    assert write_index(tmp_path, PRETRAINED_DIR).read_text() == committed.read_text(), \
        ("regenerate it: python3 -c \"from disentbook.campaign.models import write_index; from "
         "disentbook.classroom.pretrained import PRETRAINED_DIR; write_index('.', PRETRAINED_DIR)\"")


def test_a_new_seed_trains_in_the_precision_its_curve_measured_so_far(tmp_path, monkeypatch):
    """A curve's seeds compute alike whichever machine trains them: a seed that starts from scratch takes the precision
    of the rows measured so far (here the one this machine's 'auto' would not choose), its checkpoint records it, and a
    resumed seed keeps its own. No rows, or rows that already disagree: the recipe's own setting ('auto': bf16 where the CPU
    computes it natively)."""
    import warnings
    import disentbook.campaign.zoo as Z
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.ledger import Clock
    from disentbook.core import write_json
    from disentbook.training.checkpoints import read_checkpoint_config
    from disentbook.training.config import resolve_precision
    monkeypatch.setattr(Z, "CHUNK", 10)
    z = Z.ZooRecipe("beta_vae_b4")
    assert z.precision(tmp_path) is None
    other = "fp32" if resolve_precision("auto", "cpu")[0] == "bf16" else "bf16"
    curve = read_curve(tmp_path, z); curve["seeds"] = {"0": [dict(steps=10, mig=0.1, precision=other)]}
    z.curve_file(tmp_path).parent.mkdir(parents=True)
    write_json(curve, z.curve_file(tmp_path))
    assert z.precision(tmp_path) == other
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # bf16 where the CPU has no native bf16: emulated, with a warning
        assert z.train_to(tmp_path, 1, 10, Clock(600, say=lambda *a: None), say=lambda *a: None)
        assert read_checkpoint_config(z.run_dir(tmp_path, 1) / "checkpoint")["precision"] == other
        curve["seeds"]["2"] = [dict(steps=10, mig=0.1, precision="fp32" if other == "bf16" else "bf16")]
        write_json(curve, z.curve_file(tmp_path))
        assert z.precision(tmp_path) is None           # rows disagree: nothing to follow
        assert z.train_to(tmp_path, 1, 20, Clock(600, say=lambda *a: None), say=lambda *a: None)   # goes on as it began
        assert z.train_to(tmp_path, 3, 10, Clock(600, say=lambda *a: None), say=lambda *a: None)   # nothing to follow:
    assert read_checkpoint_config(z.run_dir(tmp_path, 1) / "checkpoint")["precision"] == other
    here = resolve_precision("auto", "cpu")[0]                # bf16 where this CPU has it natively, fp32 elsewhere
    assert Z.CPU_PRECISION == "auto" and read_checkpoint_config(z.run_dir(tmp_path, 3) / "checkpoint")["precision"] == here


def test_a_curve_seed_at_its_last_measured_length_is_carried_while_its_curves_go_on(tmp_path):
    """A curve seed whose checkpoint sits at the length it was last measured at travels to the next checkout while the
    curves may still train it further (else it would start again from its seed); once the stage is done it does not."""
    import disentbook.campaign.stages as S
    import disentbook.campaign.zoo as Z
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.ledger import LEDGER, write_stage
    from disentbook.core import write_json
    from disentbook.training.checkpoints import write_checkpoint
    z = Z.ZooRecipe("factor_vae")
    curve = read_curve(tmp_path, z); curve["seeds"] = {"0": [dict(steps=2500, mig=0.1, precision="fp32")]}
    z.curve_file(tmp_path).parent.mkdir(parents=True); write_json(curve, z.curve_file(tmp_path))
    ck = write_checkpoint(z.run_dir(tmp_path, 0) / "checkpoint", b"w", dict(step=2500, train_seconds=S.CARRY_MIN_SECONDS + 1))
    write_stage(tmp_path / LEDGER, "zoo-factor_vae", dict(status="partial"))
    keep, left = S.carried_paths(tmp_path)
    assert ck / "config.json" in keep and not left
    write_stage(tmp_path / LEDGER, "zoo-factor_vae", dict(status="ok"))
    keep, _ = S.carried_paths(tmp_path)
    assert ck / "config.json" not in keep


def test_a_reading_of_the_gates_on_the_curves_is_carried_whatever_the_stage_did(tmp_path):
    """The reading of a paper's gates on its curve seeds (`campaign.futility`) travels with the curves, done or not:
    it is why a reproduction trained or did not."""
    import disentbook.campaign.stages as S
    from disentbook.campaign.futility import gates_file
    from disentbook.campaign.ledger import LEDGER, write_stage
    f = gates_file(tmp_path, "tcwae"); f.parent.mkdir(parents=True); f.write_text('{"train": false}')
    for status in ("partial", "ok"):
        write_stage(tmp_path / LEDGER, "reproduce-tcwae", dict(status=status))
        assert f in S.carried_paths(tmp_path)[0]
    assert gates_file(tmp_path, "dipvae") not in S.carried_paths(tmp_path)[0]


def test_every_committed_curve_record_is_read_by_its_subject_as_it_is():
    """The records the campaign committed go on under the code that reads them now (a record is never rewritten to fit):
    each zoo recipe's and each paper row's curve file in this checkout is accepted by its subject, the zoo's first
    record with the precision it was written with among its settings included."""
    import disentbook.campaign.zoo as Z
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.papers import PaperRow, headline
    subjects = [Z.ZooRecipe(n) for n in Z.RECIPES] + [PaperRow(p, s) for p in ("contrastive",) for s in headline(p)[1]]
    found = [s for s in subjects if s.curve_file(ROOT).is_file()]
    assert {s.name for s in found} >= {"beta_tcvae", "contrastive/srb_vae"}
    for s in found:
        assert read_curve(ROOT, s)["seeds"] == json.loads(s.curve_file(ROOT).read_text())["seeds"]
    assert "precision" in json.loads(Z.ZooRecipe("beta_tcvae").curve_file(ROOT).read_text())["settings"]
    z = Z.ZooRecipe("beta_tcvae")
    assert not z.same_identity("settings", dict(Z.SETTINGS, lr=1e-3, precision="fp32"), Z.SETTINGS)   # another lr still refused


def test_a_curve_goes_on_only_on_the_data_it_was_measured_on(tmp_path, monkeypatch):
    """Every committed curve was measured on the package's own data (procedural dSprites, the embedded digits): once the
    data directory holds the official dSprites or the full MNIST, which `source='auto'` would read instead, its subject
    refuses it in one line, `--list` says so beside each such stage, and a stage that would train it ends in one line with
    status 2, its curve left as it was."""
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.ledger import CampaignError
    from disentbook.campaign.papers import PaperRow
    from disentbook.data.digits import MNIST_FILES
    import disentbook.campaign.zoo as Z
    data = tmp_path / "data"
    (data / "dsprites").mkdir(parents=True)
    (data / "dsprites" / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz").write_bytes(b"")
    raw = data / "MNIST" / "raw"; raw.mkdir(parents=True)
    for names in MNIST_FILES.values():
        for n in names: (raw / n).write_bytes(b"")
    z, row = Z.ZooRecipe("beta_vae_b4"), PaperRow("contrastive", "srb_vae")
    assert read_curve(ROOT, z)["seeds"] and read_curve(ROOT, row)["seeds"]        # on the package's data: as committed
    monkeypatch.setenv("DISENTBOOK_DATA", str(data))
    for subj, words in ((z, "dsprites (official)"), (row, "digits (mnist)")):
        try: read_curve(ROOT, subj); raise AssertionError(f"{subj.name} went on on other data")
        except CampaignError as e:
            assert "measured on the package's own data" in str(e) and words in str(e) and "\n" not in str(e), str(e)
    checkout = tmp_path / "checkout"
    curve = checkout / z.curve_file(ROOT).relative_to(ROOT)
    curve.parent.mkdir(parents=True); curve.write_bytes(z.curve_file(ROOT).read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISENTBOOK_DATA=str(data))
    run = lambda *a: subprocess.run([sys.executable, "-m", "disentbook", "campaign", *a, "--root", str(checkout)],
                                    capture_output=True, text=True, env=env, timeout=300)
    r = run("--list")
    line = next(l for l in r.stdout.splitlines() if l.startswith("zoo-beta_vae_b4 "))
    assert r.returncode == 0 and "cannot go on here" in line and "dsprites (official)" in line, r.stdout[-2000:] + r.stderr[-2000:]
    r = run("--stage", "zoo-beta_vae_b4", "--budget", "5m")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "dsprites (official)" in r.stderr, r.stderr[-2000:]
    assert curve.read_bytes() == z.curve_file(ROOT).read_bytes()


def test_factor_gaps_golden_values():
    "Exact values on four points: factor a held by latents 0 and 1 (split), b by latent 2 alone, c constant (left out)."
    import math
    import numpy as np
    a, b = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    codes = np.stack([a, a, b], 1).astype(float)
    from disentbook.campaign.zoo import factor_gaps
    row = factor_gaps(codes, np.stack([a, b, np.zeros(4, int)], 1), ("a", "b", "c"))
    assert math.isclose(row["top/a"], 1.0) and math.isclose(row["gap/a"], 0.0, abs_tol=1e-12) and row["latent/a"] in (0, 1)
    assert math.isclose(row["top/b"], 1.0) and math.isclose(row["gap/b"], 1.0) and row["latent/b"] == 2
    assert math.isclose(row["mig"], 0.5) and "gap/c" not in row
