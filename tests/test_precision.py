"""Training precision: 'auto' is bf16 autocast (and channels-last conv weights on a CPU) where the hardware computes bf16
natively, fp32 elsewhere; 'fp32' / 'bf16' as asked; recorded in run.json; a bf16 run resumes bit-exactly, learns as the
fp32 run of the same seed does on a short run, and bad values are one-line errors."""
import json, subprocess, sys, warnings

import pytest
import torch

import disentbook.training.config as T
from disentbook.core import InputError
from disentbook.data.dsprites import DSprites
from disentbook.data.samplers import SingleSampler
from disentbook.nets import VAE
from disentbook.objectives.base import make_objective
from disentbook.training.config import TrainConfig, resolve_precision
from disentbook.training.trainer import Trainer


@pytest.fixture
def native(monkeypatch):
    "Pretend the CPU has (True) or lacks (False) native bf16."
    def set_(flag: bool): monkeypatch.setattr(T, "cpu_native_bf16", lambda: flag)
    return set_


def test_resolve_auto_follows_the_hardware(native):
    native(True)
    assert resolve_precision("auto", "cpu") == ("bf16", "auto: this cpu has native bf16")
    native(False)
    assert resolve_precision("auto", "cpu") == ("fp32", "auto: this cpu has no native bf16")
    assert resolve_precision("fp32", "cpu")[0] == "fp32" and resolve_precision("auto", "cpu", amp=False)[0] == "fp32"


def test_bf16_without_native_support_warns(native):
    native(False)
    with pytest.warns(UserWarning, match="emulated"):
        assert resolve_precision("bf16", "cpu")[0] == "bf16"
    native(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_precision("bf16", "cpu") == ("bf16", "asked for")


@pytest.mark.parametrize("bad, msg", [(dict(precision="fp16"), "precision='fp16'"),
                                      (dict(precision="bf16", amp=False), "amp=False"),
                                      (dict(precision=None), "precision=None")])
def test_bad_precision_is_one_error(bad, msg):
    with pytest.raises(InputError, match=msg): TrainConfig(**bad)


def test_old_checkpoint_configs_still_load():
    "A TrainConfig dict written before `precision` existed (no key, amp False on a CPU) reads back as fp32."
    c = TrainConfig.from_dict(dict(steps=5, amp=False))
    assert c.precision == "auto" and resolve_precision(c.precision, "cpu", c.amp)[0] == "fp32"


def _trainer(precision, steps=40, seed=0, out_dir=None, batch_size=32):
    torch.manual_seed(seed)
    data = DSprites().subset(posX=range(0, 32, 4), posY=range(0, 32, 4))
    model = VAE(image_size=64, latent_dim=6, hidden=64)
    obj = make_objective("beta_vae", beta=4.0, data=data, model=model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # bf16 on a CPU without native bf16 warns; the numbers are what is tested
        return Trainer(model, obj, SingleSampler(data), TrainConfig(steps=steps, batch_size=batch_size, lr=1e-3, seed=seed,
                       device="cpu", precision=precision, log_every=10, ckpt_every=10, progress=False), out_dir=out_dir)


def test_bf16_trainer_autocasts_and_stores_channels_last():
    "While `fit` trains in bf16 on a CPU the conv weights are channels-last (fp32) and convolutions compute in bf16; after it,"
    "the default layout again, so the trained model evaluates as the same weights loaded from the checkpoint."
    t = _trainer("bf16", steps=2)
    assert t.precision == "bf16" and t.channels_last
    conv = next(m for m in t.model.modules() if isinstance(m, torch.nn.Conv2d) and m.in_channels > 1)
    seen = []
    h = conv.register_forward_hook(lambda m, i, o: seen.append(
        (o.dtype, m.weight.dtype, m.weight.is_contiguous(memory_format=torch.channels_last))))
    t.fit(); h.remove()
    assert seen and set(seen) == {(torch.bfloat16, torch.float32, True)}
    assert conv.weight.is_contiguous()
    f = _trainer("fp32", steps=2)
    assert f.precision == "fp32" and not f.channels_last


def test_bf16_learns_as_fp32_on_a_short_run():
    """Seeds 0-2, 60 steps of batch 16 each: every run's final loss is far below its first step's, and the bf16 runs'
    mean final loss lies within the fp32 seeds' range widened by half its width on each side (the rule of
    benchmarks/bench_precision.py; measured on a CPU without native bf16, through PyTorch's emulated bf16 kernels: fp32
    724 / 703 / 717, bf16 719 / 703 / 716, from first losses of 2,260-3,172). Small, so that it stays quick on any CPU."""
    res = {}
    for p in ("fp32", "bf16"):
        res[p] = []
        for seed in range(3):
            h = _trainer(p, steps=60, seed=seed, batch_size=16).fit().history
            first, last = float(h["loss"].iloc[0]), float(h["loss"].iloc[-3:].mean())
            assert last < 0.7 * first, (p, seed, first, last)
            res[p].append(last)
    lo, hi = min(res["fp32"]), max(res["fp32"])
    mean = sum(res["bf16"]) / 3
    assert lo - (hi - lo) / 2 <= mean <= hi + (hi - lo) / 2, res


def test_bf16_resume_is_bit_exact(tmp_path):
    straight = _trainer("bf16", steps=20, batch_size=16).fit()
    first = _trainer("bf16", steps=20, out_dir=tmp_path / "run", batch_size=16)
    first.fit(10); first.save()
    again = _trainer("bf16", steps=20, out_dir=tmp_path / "run", batch_size=16).load(tmp_path / "run" / "checkpoint")
    again.fit()
    for k, v in straight.model.state_dict().items():
        assert torch.equal(v, again.model.state_dict()[k]), k


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "disentbook", *args], cwd=cwd, capture_output=True, text=True)


def test_cli_records_precision_and_refuses_a_change_on_resume(tmp_path):
    r = _cli("train", "--method", "beta_vae", "--steps", "4", "--batch-size", "8", "--precision", "fp32", "--threads", "1",
             "--hidden", "32", "--no-eval", "--out", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["precision"] == "fp32" and run["precision_asked"] == "fp32" and run["device"] == "cpu"
    assert "(fp32)" in r.stdout
    r = _cli("train", "--method", "beta_vae", "--steps", "6", "--precision", "bf16", "--resume", "--hidden", "32",
             "--no-eval", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and "--precision bf16 differs from the checkpoint's fp32" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _cli("train", "--precision", "half", "--out", "run2", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice: 'half'" in r.stderr


def test_harness_passes_the_precision_option():
    from disentbook.repro.runs import HARNESS_OPTIONS, train_config
    assert HARNESS_OPTIONS["precision"] == "auto"
    cfg = dict(train=dict(steps=10, batch_size=8, lr=1e-3))
    assert train_config(cfg, 0, "cpu", precision="fp32").precision == "fp32"
    assert train_config(cfg, 0, "cpu").precision == "auto"


def test_cpu_ensemble_trains_bf16_where_its_trainers_would(native):
    "The engine's vmapped ensemble autocasts on CPUs too: on a CPU with native bf16 it computes as its Trainers would."
    import disentbook  # noqa: F401  (registers every objective)
    from disentbook.training.fit import fit_ensemble
    from disentbook.training.run import run_specs
    from disentbook.data.base import LabelledImages
    native(True)
    g = torch.Generator().manual_seed(0)
    data = LabelledImages((torch.rand(32, 1, 28, 28, generator=g) > 0.7).to(torch.uint8) * 255,
                          torch.zeros(32, dtype=torch.long), ["blob"], "random blobs")
    model = dict(kind="vae", image_size=28, channels=1, latent_dim=4, hidden=16)
    members = [dict(objective="beta_vae", params=dict(beta=b), seed=0) for b in (1.0, 4.0)]
    config = TrainConfig(steps=2, batch_size=8, lr=1e-3, log_every=1, device="cpu", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no fallback, no warning
        res = fit_ensemble(run_specs(members, model, config), data)
        assert all(r["precision"] == "bf16" and r["precision_fallback"] is None for r in res)
        res = fit_ensemble(run_specs(members, model, TrainConfig.from_dict(config.to_dict() | dict(precision="fp32"))), data)
    assert all(r["precision"] == "fp32" and r["precision_fallback"] is None for r in res)
    from disentbook.repro.runs import engine_record
    assert engine_record(dict(res[0], mode="eager", members=2, precision_fallback="bf16 -> fp32: x"), "")["fallback"]


def test_precision_bench_keeps_results_in_the_checkout_and_compares_like_with_like(tmp_path, monkeypatch):
    "Kept results of today's settings are collected; one trained at another width or length is not (it trains again)."
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "benchmarks")]
    import bench_precision as BP
    from disentbook.campaign.zoo import SETTINGS
    monkeypatch.setattr(BP, "KEPT", tmp_path)
    def keep(seed, hidden, steps=BP.STEPS):
        f = tmp_path / "beta_vae" / "bf16" / f"seed{seed}.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(dict(method="beta_vae", precision="bf16", seed=seed, steps=steps,
                                     settings=dict(hidden=hidden), losses={}, metrics={}, seconds=1.0)))
    keep(0, SETTINGS["hidden"]); keep(1, SETTINGS["hidden"] // 2); keep(2, SETTINGS["hidden"], steps=7)
    assert [r["seed"] for r in BP.collect()] == [0]


def test_the_discriminator_is_fp32_under_bf16_autocast():
    "Every layer of an MLPDiscriminator computes fp32 under CPU bf16 autocast: its logits equal the fp32 module's exactly."
    from disentbook.nets import MLPDiscriminator
    d, z = MLPDiscriminator(10, hidden=64, depth=3), torch.randn(32, 10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = d(z.bfloat16())
    assert inside.dtype == torch.float32 and torch.equal(inside, d(z.bfloat16().float()))
