"""The command line: every bad input gives a clear message and a non-zero exit status."""
import json

import pytest

from disentbook.cli import main


@pytest.fixture(autouse=True)
def offline_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DISENTBOOK_OFFLINE", "1")


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_unknown_names(capsys):
    rc, _, err = run(capsys, "reproduce", "nope", "--scale", "smoke")
    assert rc == 2 and "unknown reproduction 'nope'; known:" in err and "vae" in err
    rc, _, err = run(capsys, "train", "--method", "nope")
    assert rc == 2 and "unknown objective 'nope'" in err and "beta_vae" in err
    rc, _, err = run(capsys, "train", "--dataset", "imagenet")
    assert rc == 2 and "unknown dataset 'imagenet'" in err and "dsprites" in err
    rc, _, err = run(capsys, "data", "verify", "nope")
    assert rc == 2 and "unknown dataset 'nope'" in err


def test_bad_scale_and_params(capsys):
    with pytest.raises(SystemExit) as e: main(["reproduce", "vae", "--scale", "huge"])
    assert e.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err
    rc, _, err = run(capsys, "train", "--param", "beta", "--device", "cpu")
    assert rc == 2 and "KEY=VALUE" in err
    rc, _, err = run(capsys, "train", "--method", "beta_vae", "--param", "beta=-1", "--steps", "1")
    assert rc == 2 and "beta must be >= 0" in err


def test_missing_data_files(capsys, tmp_path):
    rc, out, _ = run(capsys, "data", "verify", "mnist")
    assert rc == 1 and "missing" in out and "train-images-idx3-ubyte.gz" in out
    rc, _, err = run(capsys, "data", "prepare", "mnist")
    assert rc == 2 and "train-images-idx3-ubyte.gz" in err and str(tmp_path / "data") in err
    rc, _, err = run(capsys, "data", "prepare", "dsprites", "--no-download")
    assert rc == 2 and "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz" in err


def test_corrupt_data_file(capsys, tmp_path):
    raw = tmp_path / "data" / "MNIST" / "raw"; raw.mkdir(parents=True)
    (raw / "train-labels-idx1-ubyte.gz").write_bytes(b"\0" * 28881)  # right size, wrong content
    rc, out, _ = run(capsys, "data", "verify", "mnist")
    assert rc == 1 and "wrong sha256" in out


def test_reproduce_smoke(capsys, tmp_path):
    out = tmp_path / "res"
    rc, stdout, err = run(capsys, "reproduce", "vae", "--scale", "smoke", "--out", str(out), "--device", "cpu")
    assert rc == 0, err
    assert (out / "metrics.json").is_file() and "finished in" in stdout    # the report's content: tests of repro.vae
    rc, _, err = run(capsys, "reproduce", "vae", "--scale", "smoke", "--out", str(out), "--device", "cpu")
    assert rc == 2 and "already holds a reproduction" in err and "--resume" in err


def test_reproduce_on_other_seeds(capsys, tmp_path):
    "`--seed N -o seeds=K`: K seeds from seed N, every row; a count that is not a whole number >= 1 is a one-line error."
    out = tmp_path / "res"
    rc, _, err = run(capsys, "reproduce", "vae", "--scale", "smoke", "--out", str(out), "--device", "cpu", "--seed", "3",
                     "-o", "seeds=2")
    assert rc == 0, err
    assert json.loads((out / "metrics.json").read_text())["seeds"] == [3, 4]
    assert {p.name for p in out.glob("runs/*/*/seed*")} == {"seed3", "seed4"}
    rc, _, err = run(capsys, "reproduce", "vae", "--scale", "smoke", "--out", str(tmp_path / "bad"), "-o", "seeds=0")
    assert rc == 2 and "seeds: expected a whole number" in err and "\n" not in err.strip()


def test_train_and_resume(capsys, tmp_path):
    out = tmp_path / "t"
    args = ["train", "--method", "beta_vae", "--param", "beta=2", "--dataset", "digits", "--batch-size", "8",
            "--latent-dim", "3", "--out", str(out), "--device", "cpu", "--hidden", "16", "--no-eval", "--data-param", "n=64"]
    assert run(capsys, *args, "--steps", "3")[0] == 0
    cfg = json.loads((out / "checkpoint" / "config.json").read_text())
    assert cfg["objective"] == {"name": "beta_vae", "beta": 2.0} and cfg["step"] == 3
    assert run(capsys, *args, "--steps", "5", "--resume")[0] == 0
    assert json.loads((out / "checkpoint" / "config.json").read_text())["step"] == 5
    # resuming with a different model or objective configuration is refused, naming the differing key
    rc, _, err = run(capsys, *[a if a != "3" else "4" for a in args], "--steps", "6", "--resume")
    assert rc == 2 and "latent_dim" in err, err
    rc, _, err = run(capsys, *[a if a != "beta=2" else "beta=3" for a in args], "--steps", "6", "--resume")
    assert rc == 2 and "beta" in err, err



def test_train_with_glorot_initial_weights_resumes_with_them(capsys, tmp_path):
    out = tmp_path / "g"
    args = ["train", "--method", "annealed_vae", "--dataset", "digits", "--batch-size", "8", "--latent-dim", "3",
            "--out", str(out), "--device", "cpu", "--hidden", "16", "--no-eval", "--data-param", "n=64"]
    assert run(capsys, *args, "--steps", "2", "--init", "glorot")[0] == 0
    assert json.loads((out / "checkpoint" / "config.json").read_text())["model"]["init"] == "glorot"
    assert run(capsys, *args, "--steps", "4", "--resume")[0] == 0              # the run's own start, unasked
    rc, _, err = run(capsys, *args, "--steps", "6", "--resume", "--init", "pytorch")
    assert rc == 2 and "init" in err and "\n" not in err.strip(), err
    plain = tmp_path / "p"
    assert run(capsys, *[a if a != str(out) else str(plain) for a in args], "--steps", "2")[0] == 0
    assert "init" not in json.loads((plain / "checkpoint" / "config.json").read_text())["model"]
    rc, _, err = run(capsys, "train", "--method", "cvae", "--steps", "1", "--init", "glorot", "--out", str(tmp_path / "c"))
    assert rc == 2 and "no choice of initial weights" in err, err
    with pytest.raises(SystemExit) as e: main([*args, "--steps", "1", "--init", "xavier"])
    assert e.value.code == 2 and "invalid choice: 'xavier'" in capsys.readouterr().err

def test_reproduce_options_reach_the_reproduction(capsys, tmp_path, monkeypatch):
    from disentbook.core import REPRODUCTIONS
    seen = {}
    def echo(scale="quick", out_dir=None, device=None, seed=0, sweep=None, celeba_root=None):
        seen.update(scale=scale, seed=seed, sweep=sweep, celeba_root=celeba_root); return {}
    monkeypatch.setitem(REPRODUCTIONS, "echo", echo)
    rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", str(tmp_path), "--seed", "3",
                     "-o", "celeba_root=/data/celeba", "--option", "sweep=false")
    assert rc == 0, err
    assert seen == dict(scale="smoke", seed=3, sweep=False, celeba_root="/data/celeba")
    rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "-o", "colour=red")
    assert rc == 2 and "has no option colour; it accepts: sweep, celeba_root" in err and "\n" not in err.strip()
    rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "-o", "sweep")
    assert rc == 2 and "expected KEY=VALUE" in err


def test_pretrained_lists_the_shipped_models_with_their_cards(capsys):
    import disentbook
    names = disentbook.available_pretrained()                   # importable from the top level
    assert "tcwae_mws" in names and "TCWAE" not in names
    rc, out, err = run(capsys, "pretrained")
    assert rc == 0, err
    assert f"{len(names)} pretrained models" in out
    for n in names:
        card = disentbook.pretrained_card(n)
        assert f"\n{n}: {card['method']}" in out and card["command"] in out    # each model with how it was trained
    assert "mig/score/train" in out                              # and its recorded metrics
    rc, out, _ = run(capsys, "pretrained", "tcwae_mws")
    assert rc == 0 and json.loads(out)["name"] == "tcwae_mws"
    rc, _, err = run(capsys, "pretrained", "TCWAE")
    assert rc == 2 and "no pretrained model 'TCWAE'; shipped:" in err and "tcwae_mws" in err


def test_reproduce_threads(capsys, tmp_path, monkeypatch):
    import torch
    from disentbook.core import REPRODUCTIONS
    seen = {}
    monkeypatch.setitem(REPRODUCTIONS, "echo", lambda scale="quick", out_dir=None, device=None, seed=0: seen.update(t=torch.get_num_threads()) or {})
    before = torch.get_num_threads()
    try:
        rc, _, err = run(capsys, "reproduce", "echo", "--scale", "smoke", "--out", str(tmp_path / "r"), "--threads", "1")
        assert rc == 0, err
        assert seen["t"] == 1
    finally: torch.set_num_threads(before)
    with pytest.raises(SystemExit) as e: main(["reproduce", "echo", "--threads", "0"])
    assert e.value.code == 2 and "expected an integer >= 1" in capsys.readouterr().err


def test_colored_mnist_probe_reads_the_code_the_objective_classifies(tmp_path, monkeypatch, capsys):
    "`train` / `evaluate` score Colored-MNIST runs as the reproduction does: Ours' probe reads z_p (d_p = 10 of 20), not all."
    from sklearn.linear_model import LogisticRegression
    widths, fit = [], LogisticRegression.fit
    def spy(self, X, y, *a, **k): widths.append(X.shape[1]); return fit(self, X, y, *a, **k)
    monkeypatch.setattr(LogisticRegression, "fit", spy)
    out = tmp_path / "swap"
    assert main(["train", "--method", "swap_invariance", "--steps", "2", "--eval-points", "60", "--out", str(out)]) == 0
    assert main(["evaluate", str(out), "--eval-points", "60"]) == 0
    assert widths == [10, 10]
    assert main(["train", "--method", "inv_cnn", "--steps", "2", "--eval-points", "60", "--out", str(tmp_path / "cnn")]) == 0
    assert widths[-1] == json.loads((tmp_path / "cnn" / "run.json").read_text())["model"]["latent_dim"]   # the whole code


def test_output_into_a_reader_that_stops_early_is_no_traceback(tmp_path):
    """`disentbook campaign --list | head -1`: output cut short by its reader ends quietly, status 0. The reader here
    closes before the command writes anything, so every write meets a closed pipe (measured: without the handling in
    `cli.main`, status 1 and a BrokenPipeError traceback)."""
    import subprocess, sys
    p = subprocess.Popen([sys.executable, "-m", "disentbook", "campaign", "--list", "--root", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read(); p.wait(timeout=120)
    assert p.returncode == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
