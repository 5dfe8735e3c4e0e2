"""The dSprites zoo on a GPU (`python3 -m disentbook campaign --stage gpu-zoo-NAME`), rehearsed on the CPU at a toy grid:
a call cut by its budget mid-way (the members at different steps), packed, unpacked into another checkout and finished
there gives the same rows as a call never cut; the stage asks for a GPU in one line where there is none."""
import json, os, subprocess, sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# the GPU zoo stage on the CPU: three seeds of a small network, a grid of 4 and 8 steps, a few hundred images measured;
# CUT_AFTER_SAVES=n ends the call as the budget's timer would, right after the n-th member checkpoint
DRIVER = """
import os, sys
import disentbook.campaign.gpuzoo as G, disentbook.campaign.zoo as Z
from disentbook.campaign.lengths import LengthRule
from disentbook.campaign.reproductions import OutOfBudget
from disentbook.cli import main
from disentbook.training.trainer import Trainer
G.DEVICE, G.CHUNK, G.MARGIN = "cpu", 2, 0.0
Z.GRID, Z.RULE, Z.CURVE_SEEDS = (4, 8), LengthRule(min_stop=8, min_seeds=3), (0, 1, 2)
Z.NUM_POINTS, Z.FVAE = 300, dict(batch_size=16, num_train=20, num_eval=10, num_variance_estimate=300)
Z.SETTINGS = dict(Z.SETTINGS, batch_size=16, hidden=32)
cut, saves = int(os.environ.get("CUT_AFTER_SAVES", "0")), [0]
if cut:
    save = Trainer.save
    def counted(self, *a, **k):
        out = save(self, *a, **k); saves[0] += 1
        if saves[0] >= cut: raise OutOfBudget()
        return out
    Trainer.save = counted
sys.exit(main(["campaign", *sys.argv[1:]]))
"""
STAGE = "gpu-zoo-beta_vae_b1"


def campaign(root, *args, **env):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", DRIVER, *args, "--root", str(root)], capture_output=True, text=True,
                          env=env, timeout=600)


def rows(root) -> dict:
    "{(seed, steps): row} of the stage's record without the timings and the machine."
    rec = json.loads((root / "benchmarks" / "curves" / "zoo-gpu" / "beta_vae_b1.json").read_text())
    return {(s, r["steps"]): {k: v for k, v in r.items() if "seconds" not in k and k != "machine"}
            for s, rs in rec["seeds"].items() for r in rs}


def status(root) -> str:
    return json.loads((root / "benchmarks" / "campaign.json").read_text())["stages"][STAGE]["status"]


def test_a_gpu_zoo_stage_cut_mid_way_goes_on_in_another_checkout_with_the_rows_of_an_uncut_call(tmp_path):
    src, dst, ref, parts = tmp_path / "gpu", tmp_path / "here", tmp_path / "ref", tmp_path / "parts"
    # cut after the fourth member checkpoint: the three members at step 2, then the first of them at step 4
    r = campaign(src, "--stage", STAGE, "--budget", "30m", CUT_AFTER_SAVES="4")
    assert r.returncode == 0 and status(src) == "partial", r.stdout + r.stderr
    assert "the budget ran out" in r.stdout, r.stdout
    r = campaign(src, "--pack", str(parts))
    assert r.returncode == 0 and "packed" in r.stdout, r.stdout + r.stderr
    r = campaign(dst, "--unpack", str(parts))
    assert r.returncode == 0, r.stdout + r.stderr
    steps = {s: json.loads((dst / "results/campaign/zoo-gpu/beta_vae_b1" / f"seed{s}/checkpoint/config.json").read_text())["step"]
             for s in (0, 1, 2)}
    assert steps == {0: 4, 1: 2, 2: 2}, steps
    r = campaign(dst, "--stage", STAGE, "--budget", "30m")
    assert r.returncode == 0 and status(dst) == "ok", r.stdout + r.stderr
    r = campaign(ref, "--stage", STAGE, "--budget", "30m")
    assert r.returncode == 0 and status(ref) == "ok", r.stdout + r.stderr
    assert sorted(rows(dst)) == [(s, L) for s in ("0", "1", "2") for L in (4, 8)]
    assert rows(dst) == rows(ref)                  # every measured number as if the call had never been cut
    rec = json.loads((dst / "benchmarks/curves/zoo-gpu/beta_vae_b1.json").read_text())
    assert rec["device"] == "cpu" and rec["engine"] == "ensemble" and rec["choice"]["steps"] in (4, 8)
    # the finished stage packs its record and the shipped seed's float16 weights, no live checkpoint
    r = campaign(dst, "--pack", str(tmp_path / "done"))
    assert r.returncode == 0, r.stdout + r.stderr
    third = tmp_path / "third"                     # a checkout: the finished recipe ships as it lands
    (third / "disentbook" / "assets" / "pretrained").mkdir(parents=True)
    r = campaign(third, "--unpack", str(tmp_path / "done"))
    assert r.returncode == 0 and "beta_vae_b1: shipped seed" in r.stdout, r.stdout + r.stderr
    kept = list(third.rglob("kept/step_*/config.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["weights_copy"] == "float16", kept
    assert not list(third.rglob("checkpoint/config.json"))
    card = json.loads((third / "disentbook/assets/pretrained/beta_vae_b1.json").read_text())
    assert card["command"].endswith("--stage gpu-zoo-beta_vae_b1") and (third / "reports/pretrained/README.md").is_file()
    r = campaign(dst, "--list")
    line = next(l for l in r.stdout.splitlines() if l.startswith(STAGE))
    assert " ok " in line and "length" in line, line


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the stage would train")
def test_a_gpu_zoo_stage_asks_for_a_gpu_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "disentbook", "campaign", "--stage", STAGE, "--budget", "1m",
                        "--root", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "trains on a CUDA GPU" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "benchmarks" / "curves" / "zoo-gpu").exists()


def test_a_recipe_ships_from_its_gpu_record_with_the_device_on_its_card(tmp_path, monkeypatch):
    """`campaign.models.ship(..., gpu=True)`: the seed the shipping rule names in the GPU record, at its chosen length, its
    card naming the GPU stage and the device; `shipped_from_zoo` tells it from a CPU stage's model."""
    import disentbook.campaign.gpuzoo as G, disentbook.campaign.zoo as Z
    from disentbook.campaign import models
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.lengths import LengthRule
    from disentbook.campaign.ledger import Clock
    for mod, k, v in [(G, "DEVICE", "cpu"), (G, "CHUNK", 2), (G, "MARGIN", 0.0), (Z, "GRID", (4, 8)),
                      (Z, "RULE", LengthRule(min_stop=8, min_seeds=3)), (Z, "CURVE_SEEDS", (0, 1, 2)), (Z, "NUM_POINTS", 300),
                      (Z, "FVAE", dict(batch_size=16, num_train=20, num_eval=10, num_variance_estimate=300)),
                      (Z, "SETTINGS", dict(Z.SETTINGS, batch_size=16, hidden=32))]:
        monkeypatch.setattr(mod, k, v)
    root, dest = tmp_path / "root", tmp_path / "models"
    assert G.stage(root, "beta_vae_b1", Clock(3600), lambda s: None) == "ok"
    curve = read_curve(root, G.GpuZooRecipe("beta_vae_b1"))
    seed, sel = Z.shipped_seed(curve, G.GpuZooRecipe("beta_vae_b1"))
    card = models.ship(root, "beta_vae_b1", dest, say=lambda s: None, gpu=True)
    assert card["command"].endswith("--stage gpu-zoo-beta_vae_b1") and "ensemble" in card["train"]["device"]
    assert (card["train"]["seed"], card["train"]["steps"]) == (seed, curve["choice"]["steps"])
    assert card["figures"]["curve_record"] == "benchmarks/curves/zoo-gpu/beta_vae_b1.json"
    assert models.shipped_from_zoo("beta_vae_b1", dest, gpu=True) and not models.shipped_from_zoo("beta_vae_b1", dest)
