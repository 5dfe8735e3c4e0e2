"""What a newcomer meets (issue 24): every registered method trains *and evaluates* through the CLI with its own
defaults (its dataset, the dataset's sizes, its latent layout) on the data shipped in the package; only the
number of steps and the batch size are set, so the test stays short. The CLI's main function runs in-process.

Its cost is the dSprites evaluation: DCI fits a gradient-boosted classifier per factor, 100 rounds of one tree per
class (3 + 6 + 40 + 32 + 32 classes), about 9 s per call whatever the number of points. DCI runs in full for the
first dSprites method (`DCI_ONCE`) and is left out of the other ten dSprites evaluations (MIG and the FactorVAE score
still run): the code path is the same for every method, the cost is not. Measured: about 60 s on one thread."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from disentbook.eval import suite
from disentbook.cli import main
from conftest import cli_run
from disentbook.objectives.base import NEEDS, OBJECTIVES, default_dataset

LIBRARY = sorted(n for n, c in OBJECTIVES.items() if c.__module__.startswith("disentbook."))


pytestmark = pytest.mark.usefixtures("offline_data")          # conftest: embedded digits, offline
run = cli_run                                                   # conftest: the CLI in-process


def test_all_methods_are_covered():
    assert len(LIBRARY) == 28, LIBRARY


DCI_ONCE = next(n for n in LIBRARY if default_dataset(n) == "dsprites")


@pytest.mark.parametrize("name", LIBRARY)
def test_every_method_trains_and_evaluates_with_its_defaults(name, capsys, tmp_path, monkeypatch):
    if default_dataset(name) == "dsprites" and name != DCI_ONCE:
        monkeypatch.setattr(suite, "GROUND_TRUTH_METRICS", tuple(m for m in suite.GROUND_TRUTH_METRICS if m != "dci"))
    out = tmp_path / "run"
    rc, stdout, err = run(capsys, "train", "--method", name, "--steps", 2, "--batch-size", 8, "--out", out)
    assert rc == 0, err
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["dataset"] == default_dataset(name) and f"on {default_dataset(name)!r}" in stdout
    cfg = json.loads((out / "checkpoint" / "config.json").read_text())
    assert cfg["step"] == 2 and cfg["objective"]["name"] == name and cfg["model"]["kind"] == OBJECTIVES[name].model_kind
    if cfg["model"]["kind"] == "vae": assert cfg["model"]["latent_dim"] == OBJECTIVES[name].default_latent_dim
    for need in OBJECTIVES[name].needs:                                  # bound from the default data and model
        assert all(cfg["objective"][k] is not None for k in NEEDS[need])
    h = pd.read_csv(out / "history.csv")
    assert len(h) >= 1 and np.isfinite(h.drop(columns="step").to_numpy()).all()
    rows = json.loads((out / "metrics.json").read_text())["metrics"]
    assert rows and all(math.isfinite(r["value"]) for r in rows), rows
    if name == DCI_ONCE: assert {"mig", "dci", "factor_vae"} <= {r["metric"] for r in rows}
    assert "| metric |" in stdout                                        # the table printed at the end


def test_defaults_that_were_wrong(capsys, tmp_path):
    "The methods' own datasets and layouts (the old defaults: dSprites for every method, 10 latents for swap/UAI)."
    assert default_dataset("ada_gvae") == "colored_mnist" and default_dataset("contrastive_w2") == "grassy"
    assert default_dataset("srb_vae") == "digit_style" and default_dataset("beta_vae") == "dsprites"
    assert OBJECTIVES["swap_invariance"].default_latent_dim == OBJECTIVES["uai"].default_latent_dim == 20


def one_line_error(rc, err, *needles):
    assert rc == 2, err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles: assert n in lines[0], lines[0]


def test_asking_for_more_than_the_source_has_names_the_flag(capsys, tmp_path):
    rc, _, err = run(capsys, "train", "--method", "cvae", "--data-param", "per_digit=4986", "--steps", 1, "--out", tmp_path / "a")
    one_line_error(rc, err, "per_digit=4986", "ask for at most 713", "--data-param per_digit=713", "disentbook data prepare mnist")
    rc, _, err = run(capsys, "train", "--method", "swap_invariance", "--latent-dim", 10, "--steps", 1, "--out", tmp_path / "b")
    one_line_error(rc, err, "latent_dim=10 leaves no nuisance latents", "--latent-dim 20")
    rc, _, err = run(capsys, "train", "--method", "uai", "--latent-dim", 10, "--steps", 1, "--out", tmp_path / "c")
    one_line_error(rc, err, "latent_dim=10 leaves no nuisance latents", "--latent-dim 20")
