"""Every registered method trains through the CLI; objectives declare and bind their needs; hyper-parameters are
checked by name, type and range; every bad `train` input is one line on stderr with exit status 2."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

import disentbook
from disentbook import cli, jobs
from disentbook.cli import main
from conftest import cli_run
from disentbook.core import InputError
from disentbook.objectives.base import NEEDS, OBJECTIVES, check_params, make_objective, methods_table
from disentbook.jobs import LOCK_NAME

TINY = ["--steps", "2", "--batch-size", "4", "--hidden", "16", "--latent-dim", "3", "--z-dim", "2", "--s-dim", "2",
        "--device", "cpu", "--no-eval"]
DATA = dict(single=["--dataset", "digits", "--data-param", "n=64"],
            target_background=["--dataset", "grassy", "--data-param", "per_digit=4", "--data-param", "n_background=40"],
            reference=["--dataset", "digit_style", "--data-param", "n_reference=20", "--data-param", "n_unlabelled=20",
                       "--data-param", "n_probe=20"],
            pair=["--dataset", "colored_mnist", "--latent-dim", "16"])   # after TINY: the pair methods split 10 + 6 latents


pytestmark = pytest.mark.usefixtures("offline_data")          # conftest: embedded digits, offline
run = cli_run                                                   # conftest: the CLI in-process


def one_line_error(rc, err, *needles):
    assert rc == 2, err
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles: assert n in lines[0], lines[0]
    return lines[0]


def small_disc(name):
    p = OBJECTIVES[name].params
    return [a for k, v in (("disc_hidden", 8), ("disc_depth", 1)) if k in p for a in ("--param", f"{k}={v}")]


# --- every method, through the CLI ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_registered_method_trains_through_the_cli(name, capsys, tmp_path):
    sampler = OBJECTIVES[name].sampler
    assert sampler in DATA, f"{name}: no dataset of `disentbook train` gives {sampler!r} batches"
    out = tmp_path / name
    rc, stdout, err = run(capsys, "train", "--method", name, *TINY, *DATA[sampler], *small_disc(name), "--out", out)
    assert rc == 0, err
    cfg = json.loads((out / "checkpoint" / "config.json").read_text())
    assert cfg["step"] == 2 and cfg["objective"]["name"] == name and cfg["model"]["kind"] == OBJECTIVES[name].model_kind
    h = pd.read_csv(out / "history.csv")
    assert len(h) >= 1 and np.isfinite(h.drop(columns="step").to_numpy()).all()
    for need in OBJECTIVES[name].needs:                         # bound from data / model, recorded in the checkpoint
        assert all(cfg["objective"][k] is not None for k in NEEDS[need])


def test_registry_declares_everything_and_methods_prints_it(capsys):
    rows = methods_table()
    assert {r["method"] for r in rows} == set(OBJECTIVES) >= {"beta_vae", "dip_vae_ii", "factor_vae", "tcwae_gan", "cvae"}
    library = {n: c for n, c in OBJECTIVES.items() if c.__module__.startswith("disentbook.")}   # not other tests' toys
    assert len(library) >= 28
    for name, cls in library.items():
        assert cls.paper and cls.sampler in ("single", "target_background", "reference", "pair") and cls.model_kind
        # the registry's defaults are the constructor's (direct construction and make_objective agree)
        obj = make_objective(name)
        for k, p in cls.params.items():
            if p.default is not None: assert obj.hparams[k] == p.default, (name, k)
    rc, out, _ = run(capsys, "methods")
    assert rc == 0 and "dip_vae_ii  [sampler: single; model: vae; default dataset: dsprites]" in out and "lambda_od=5.0 (>= 0)" in out
    assert "cvae  [sampler: target_background; model: contrastive_vae; default dataset: grassy; needs: latent_split]" in out
    rc, out, _ = run(capsys, "methods", "beta_tcvae")
    assert rc == 0 and "needs:   dataset_size" in out and "--param estimator='mws'" in out


def test_make_objective_right_after_import():
    code = "import disentbook; from disentbook.objectives.base import make_objective; print(make_objective('beta_vae', beta=4).config)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "{'name': 'beta_vae', 'beta': 4.0}" in out.stdout, out.stderr


# --- parameters and needs ------------------------------------------------------------------------------------------

def test_params_checked_by_name_type_and_range():
    assert check_params("dip_vae_ii") == dict(lambda_od=5.0, lambda_d=None, lambda_3=0.0)
    assert check_params("factor_vae", dict(gamma=10, latent_dim=4))["gamma"] == 10.0
    for params, msg in [(dict(bogus=1), "beta_vae has no parameter 'bogus'; valid: beta"),
                        (dict(beta="abc"), "beta must be a number >= 0, got 'abc'"),
                        (dict(beta=-1), "beta must be >= 0, got -1"), (dict(beta=float("nan")), "beta must be >= 0")]:
        with pytest.raises(InputError, match=msg): make_objective("beta_vae", **params)
    with pytest.raises(InputError, match="estimator must be a string one of 'mws', 'mss', got 'x'"): check_params("beta_tcvae", dict(estimator="x"))
    with pytest.raises(InputError, match="disc_depth must be an integer >= 1, got 2.5"): check_params("factor_vae", dict(disc_depth=2.5))
    with pytest.raises(InputError, match="disc_betas must be a list of 2 numbers"): check_params("factor_vae", dict(disc_betas=[0.5]))
    with pytest.raises(InputError, match="latent_dim must be >= 1, got 0"): check_params("factor_vae", dict(latent_dim=0))


def test_needs_are_declared_and_bound():
    from disentbook.nets import VAE
    from disentbook.objectives.contrastive import ContrastiveVAE
    x = {"x": torch.rand(4, 1, 28, 28)}
    m = VAE(28, 1, 6, hidden=16)
    btc = make_objective("beta_tcvae")
    with pytest.raises(InputError, match=r"needs dataset_size .*call objective.bind\(data=..., model=...\)"): btc(m, x, 0)
    with pytest.raises(InputError, match="cannot fill dataset_size"): btc.bind(model=m)
    assert btc.bind(data=range(100), model=m).bind(data=range(100)).dataset_size == 100      # idempotent
    assert torch.isfinite(btc(m, x, 0)["loss"])
    with pytest.raises(InputError, match="built with dataset_size=100, but the data has dataset_size=50"): btc.bind(data=range(50))
    fv = make_objective("factor_vae", disc_hidden=8, disc_depth=1, model=m)        # the latent size from the model
    assert fv.aux_nets["disc"].in_features == 6 and fv.config["latent_dim"] == 6
    with pytest.raises(InputError, match="latent_dim=4, but the model has latent_dim=6"): make_objective("factor_vae", latent_dim=4, model=m)
    assert make_objective("beta_tcvae", dataset_size=7).dataset_size == 7                    # explicit kwargs still work
    with pytest.raises(InputError, match="trains a 'contrastive_vae' model, got a 'vae' model"): make_objective("cvae", model=m)
    cm = ContrastiveVAE(28, 1, z_dim=3, s_dim=2, hidden=16)
    srb = make_objective("srb_vae_contrastive", model=cm, disc_hidden=8)
    assert (srb.z_dim, srb.s_dim, srb.image_numel) == (3, 2, 784)


# --- CLI errors: one line, exit status 2, before any data work ------------------------------------------------------

@pytest.fixture
def no_data_work(monkeypatch):
    def boom(*a, **k): raise AssertionError("data work started before the arguments were checked")
    monkeypatch.setattr(jobs, "build_dataset", boom)                  # what train_job calls
    monkeypatch.setattr(cli, "build_dataset", boom)                   # what evaluate calls


@pytest.mark.parametrize("argv,needles", [
    (["--lr", "-1"], ["--lr", "expected a finite number > 0, got '-1'"]),
    (["--lr", "nan"], ["--lr", "finite number > 0, got 'nan'"]),
    (["--steps", "0"], ["--steps", "expected an integer >= 1, got '0'"]),
    (["--steps", "2.5"], ["--steps", "expected an integer >= 1, got '2.5'"]),
    (["--param", "bogus=1"], ["beta_vae has no parameter 'bogus'; valid: beta"]),
    (["--param", "beta=abc"], ["beta must be a number >= 0, got 'abc'"]),
    (["--device", "bogus"], ["--device: expected cpu, cuda, cuda:N or mps, got 'bogus'"]),
    (["--method", "cvae"], ["method 'cvae' trains on", "datasets that fit cvae: grassy, grassy_nl"]),
    (["--method", "nope"], ["unknown objective 'nope'", "beta_vae"]),
])
def test_bad_train_arguments_are_one_line_errors(argv, needles, capsys, tmp_path, no_data_work):
    rc, _, err = run(capsys, "train", "--dataset", "digits", "--out", tmp_path / "r", *argv)
    one_line_error(rc, err, *needles)
    assert not (tmp_path / "r").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_fails_before_data_work(capsys, tmp_path, no_data_work):
    rc, _, err = run(capsys, "train", "--device", "cuda", "--out", tmp_path / "r")
    one_line_error(rc, err, "CUDA is not available", "--device cpu")


def test_out_pointing_at_a_file(capsys, tmp_path, no_data_work):
    f = tmp_path / "f.txt"; f.write_text("mine")
    rc, _, err = run(capsys, "train", "--out", f, "--device", "cpu")
    one_line_error(rc, err, "is a file")
    assert f.read_text() == "mine"


def test_existing_run_is_refused_then_resumed_or_overwritten(capsys, tmp_path):
    out = tmp_path / "r"
    base = ["train", *DATA["single"], *TINY, "--out", out]
    assert run(capsys, *base)[0] == 0
    rc, _, err = run(capsys, *base)
    one_line_error(rc, err, "already holds a run", "checkpoint/", "--resume", "--overwrite")
    rc, _, err = run(capsys, *[a if a != "2" else "4" for a in base], "--resume", "--lr", "0.001")
    one_line_error(rc, err, "--lr 0.001 differs from the checkpoint's lr 0.0005")
    rc, _, err = run(capsys, *[a if a != "4" else "8" for a in base], "--resume")
    one_line_error(rc, err, "--batch-size 8 differs from the checkpoint's batch_size 4")
    rc, _, err = run(capsys, *base, "--resume")
    one_line_error(rc, err, "--steps 2 is not more than the 2 steps")
    assert run(capsys, *[a if a != "2" else "3" for a in base], "--resume")[0] == 0
    assert json.loads((out / "checkpoint" / "config.json").read_text())["step"] == 3
    assert run(capsys, *base, "--overwrite")[0] == 0
    assert json.loads((out / "checkpoint" / "config.json").read_text())["step"] == 2


def test_lock_file_live_holder_fails_at_once_stale_is_taken_over(capsys, tmp_path):
    out = tmp_path / "r"; out.mkdir()
    lock = out / LOCK_NAME
    lock.write_text(str(os.getppid()))                      # a live process holds it
    rc, _, err = run(capsys, "train", *DATA["single"], *TINY, "--out", out)
    one_line_error(rc, err, f"in use by another disentbook process (pid {os.getppid()}")
    dead = subprocess.Popen([sys.executable, "-c", "pass"]); dead.wait()
    lock.write_text(str(dead.pid))                          # its holder died
    rc, _, err = run(capsys, "train", *DATA["single"], *TINY, "--out", out)
    assert rc == 0, err
    assert not lock.exists()


def test_same_command_twice_gives_identical_weights_and_losses(capsys, tmp_path):
    from disentbook.training.checkpoints import load_model
    args = ["train", "--method", "factor_vae", *DATA["single"], *TINY, *small_disc("factor_vae"), "--seed", "3"]
    for k in ("a", "b"): assert run(capsys, *args, "--out", tmp_path / k)[0] == 0
    ha, hb = (pd.read_csv(tmp_path / k / "history.csv") for k in ("a", "b"))
    pd.testing.assert_frame_equal(ha, hb)
    ma, mb = (load_model(tmp_path / k / "checkpoint", device="cpu").state_dict() for k in ("a", "b"))
    assert all(torch.equal(ma[k], mb[k]) for k in ma)


def test_train_prints_metrics_and_evaluate_scores_a_run(capsys, tmp_path):
    out = tmp_path / "r"
    rc, stdout, err = run(capsys, "train", "--dataset", "dsprites", "--steps", "2", "--batch-size", "4", "--hidden", "16",
                          "--latent-dim", "3", "--device", "cpu", "--eval-points", "100", "--out", out, "--threads", "1")
    assert rc == 0, err
    assert "| mig | score | train |" in stdout and "| dci | disentanglement |" in stdout and "| factor_vae | accuracy | test |" in stdout
    first = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").unlink()
    rc, stdout, err = run(capsys, "evaluate", out, "--device", "cpu")
    assert rc == 0, err and "| mig | score | train |" in stdout
    assert json.loads((out / "metrics.json").read_text())["metrics"] == first["metrics"]     # seeded: the same numbers
    rc, _, err = run(capsys, "evaluate", tmp_path / "nope")
    one_line_error(rc, err, "expected a run directory written by `disentbook train`")


def test_help_shows_defaults(capsys):
    rc, out, _ = run(capsys, "train", "--help")
    assert rc == 0 and "(default: 1000)" in out and "--threads" in out and "OUT/checkpoint/" in out


def test_data_verify_dsprites_procedural_and_no_download_hint(capsys):
    rc, out, _ = run(capsys, "data", "verify", "dsprites")
    assert rc == 0 and "official file is absent" in out and "procedural" in out
    rc, out, _ = run(capsys, "data", "verify", "mnist")
    assert rc == 1 and "--no-download" in out
    assert "data prepare mnist`" not in out                 # never a command that would download


def test_reproduce_into_an_existing_folder_is_refused(capsys, tmp_path, monkeypatch):
    from disentbook.core import REPRODUCTIONS
    calls = []
    monkeypatch.setitem(REPRODUCTIONS, "echo", lambda scale="quick", out_dir=None, device=None, seed=0: calls.append(out_dir) or {})
    out = tmp_path / "res"; out.mkdir(); (out / "report.md").write_text("old")
    rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", out)
    one_line_error(rc, err, "already holds a reproduction (report.md)", "--resume", "--overwrite")
    assert calls == []
    assert run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", out, "--resume")[0] == 0 and (out / "report.md").exists()
    assert run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", out, "--overwrite")[0] == 0 and not (out / "report.md").exists()
    rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", tmp_path / "x", "--device", "bogus")
    one_line_error(rc, err, "--device: expected cpu")


def test_the_cli_builds_every_registered_model_kind_through_the_registry():
    "`disentbook train` sizes a model by its class's `for_images` (nets.MODELS); an unknown kind is one line naming the known."
    import torch
    from disentbook.core import InputError
    from disentbook.jobs import build_model_for
    from disentbook.nets import MODELS, VAE
    from disentbook.objectives.contrastive import ContrastiveVAE
    from disentbook.objectives.refvae import RefVAE
    direct = dict(vae=lambda: VAE(image_size=28, channels=3, latent_dim=5, hidden=16),
                  contrastive_vae=lambda: ContrastiveVAE(image_size=28, channels=3, z_dim=4, s_dim=2, hidden=16, nets="paper"),
                  ref_vae=lambda: RefVAE(image_size=28, channels=3, z_dim=4, e_dim=2, likelihood="laplace", scale=0.5, hidden=16))
    assert set(direct) <= set(MODELS)
    for kind, make in direct.items():
        torch.manual_seed(0); a = build_model_for(kind, (3, 28, 28), latent_dim=5, z_dim=4, s_dim=2, hidden=16)
        torch.manual_seed(0); b = make()
        assert a.config == b.config and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(InputError, match="cannot build a 'nope' model; it builds: .*vae"): build_model_for("nope", (1, 28, 28))
