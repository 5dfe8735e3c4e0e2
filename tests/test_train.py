"Tests of disentbook.training.trainer: exact resume, the NaN guard, config checks, gradient separation of auxiliary nets."
import hashlib, json, os, re, sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentbook import core
from disentbook.core import ConfigMismatchError, CorruptFileError, InputError, NonFiniteLossError
from disentbook.training.checkpoints import CheckpointNotFoundError, load_checkpoint, load_model, read_checkpoint_config, state_path
from disentbook.training.config import TrainConfig
from disentbook.training.trainer import Trainer
from disentbook.objectives.base import Objective, Param, make_objective, register_objective


class TinyVAE(nn.Module):
    "An MLP VAE on 8x8 images with the interface of `nets.VAE`."
    def __init__(self, zdim=3, hidden=32):
        super().__init__()
        self.config = dict(kind="tiny_vae", zdim=zdim, hidden=hidden)
        self.enc = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 2 * zdim))
        self.dec = nn.Sequential(nn.Linear(zdim, hidden), nn.ReLU(), nn.Linear(hidden, 64))
    def encode(self, x): return self.enc(x).chunk(2, -1)
    def decode(self, z): return self.dec(z).view(-1, 1, 8, 8)
    def forward(self, x):
        mu, logvar = self.encode(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return dict(mu=mu, logvar=logvar, z=z, x_out=self.decode(z))
    def nll(self, x_out, x): return F.binary_cross_entropy_with_logits(x_out, x, reduction="none").flatten(1).sum(1)

def build(cfg): return TinyVAE(cfg["zdim"], cfg["hidden"])

class TensorSampler:
    def __init__(self, x): self.x, self.device = x, torch.device("cpu")
    def sample(self, batch_size, generator):
        return {"x": self.x[torch.randint(len(self.x), (batch_size,), generator=generator)]}

IMAGES = (torch.rand(128, 1, 8, 8, generator=core.make_generator(0)) > 0.5).float()

def elbo_terms(model, x):
    o = model(x)
    rec = model.nll(o["x_out"], x).mean()
    kl = 0.5 * (o["mu"] ** 2 + o["logvar"].exp() - 1 - o["logvar"]).sum(1).mean()
    return o, rec, kl

@register_objective("test_elbo")
class ELBO(Objective):
    params = dict(beta=Param("float", 1.0, "KL weight", low=0))
    def __init__(self, beta=1.0): super().__init__(beta=beta); self.beta = beta
    def forward(self, model, batch, step):
        o, rec, kl = elbo_terms(model, batch["x"])
        return dict(loss=rec + self.beta * kl, rec=rec, kl=kl)

def permute_dims(z): return z.gather(0, torch.rand_like(z).argsort(0))

def disc_loss(disc, z, zp):
    ones = torch.ones(len(z), dtype=torch.long)
    return 0.5 * (F.cross_entropy(disc(z), 0 * ones) + F.cross_entropy(disc(zp), ones))

@register_objective("test_factor")
class Factor(Objective):
    "FactorVAE-like: the main loss uses the discriminator's log-odds as TC estimate; the discriminator opposes it."
    params = dict(gamma=Param("float", 10.0, "TC weight", low=0), zdim=Param("int", 3, "latents", low=1))
    def __init__(self, gamma=10.0, zdim=3):
        super().__init__(gamma=gamma, zdim=zdim); self.gamma = gamma
        self.aux_nets["disc"] = nn.Sequential(nn.Linear(zdim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
        self.aux_optim["disc"] = dict(lr=1e-3, betas=(0.5, 0.9))
    def forward(self, model, batch, step):
        o, rec, kl = elbo_terms(model, batch["x"])
        logits = self.aux_nets["disc"](o["z"])
        tc = (logits[:, 0] - logits[:, 1]).mean()
        return dict(loss=rec + kl + self.gamma * tc, rec=rec, kl=kl, tc=tc, _z=o["z"])
    def aux_loss(self, name, model, batch, out, step):
        z = out["_z"]
        return dict(loss=disc_loss(self.aux_nets[name], z, permute_dims(z)))

def cfg(**kw): return dict(steps=20, batch_size=16, log_every=5, lr=3e-3, device="cpu", progress=False) | kw

def trainer(objective=None, model=None, out_dir=None, **kw):
    torch.manual_seed(0)
    return Trainer(model or TinyVAE(), objective or Factor(), TensorSampler(IMAGES), cfg(**kw), out_dir=out_dir)

def params(m): return [p.detach().clone() for p in m.parameters()]
def same(a, b): return all(torch.equal(x, y) for x, y in zip(a, b))


# ---------------------------------------------------------------- exact resume
@pytest.mark.parametrize("log_every", [1, 5, 3])
def test_exact_resume(tmp_path, log_every):
    straight = trainer(log_every=log_every).fit()
    first = trainer(log_every=log_every)
    first.fit(10); first.save(tmp_path / "ck")
    torch.manual_seed(99)                      # the resume must restore the global RNG itself
    resumed = Trainer.resume(tmp_path / "ck", TensorSampler(IMAGES), builder=build)
    assert resumed.step == 10 and resumed.config == straight.config
    resumed.fit()
    assert resumed.step == 20
    pd.testing.assert_frame_equal(straight.history, resumed.history, check_exact=True)
    assert len(straight.history) == len(range(log_every, 21, log_every)) + (20 % log_every != 0)
    for a, b in [(straight.model, resumed.model), (straight.objective, resumed.objective)]:
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)

def test_fit_in_chunks_logs_like_one_fit():
    a, b = trainer(log_every=4).fit(), trainer(log_every=4)
    for n in (3, 5, 7, 5): b.fit(n)
    pd.testing.assert_frame_equal(a.history, b.history, check_exact=True)


# ---------------------------------------------------------------- NaN guard
class NaNAt7(ELBO):
    def forward(self, model, batch, step):
        out = super().forward(model, batch, step)
        out["odd"] = out["kl"] * (float("nan") if step == 7 else 1.0)
        return out

class InfLossAt7(ELBO):
    def forward(self, model, batch, step):
        out = super().forward(model, batch, step)
        if step == 7: out["loss"] = out["loss"] + float("inf")
        return out

def test_nan_guard_names_term_and_step():
    t = trainer(NaNAt7(), log_every=5)
    with pytest.raises(NonFiniteLossError, match=r"term 'odd' is nan at step 7\b"):
        t.fit()
    assert t.step == 10 and t.history.step.tolist() == [5]

def test_nan_guard_first_bad_term_is_loss():
    with pytest.raises(NonFiniteLossError, match=r"term 'loss' is inf at step 7\b"):
        trainer(InfLossAt7(), log_every=5).fit()

def test_nan_guard_checks_unfinished_interval_and_save(tmp_path):
    t = trainer(NaNAt7(), log_every=100)
    with pytest.raises(NonFiniteLossError, match="step 7"): t.fit(9)
    t = trainer(NaNAt7(), log_every=100); t.train_step()
    for _ in range(8): t.train_step()
    with pytest.raises(NonFiniteLossError): t.save(tmp_path / "ck")
    assert not (tmp_path / "ck").exists(), "a diverged run must not be checkpointed"


# ---------------------------------------------------------------- no per-step host sync
def test_no_per_step_host_sync(monkeypatch):
    "The trainer itself syncs once per log interval (torch's CPU Adam calls .item() on its step counts: not ours)."
    import disentbook.training.trainer
    t = trainer(ELBO(), log_every=10, steps=30)
    calls = []
    for name in ("item", "cpu", "tolist", "__float__", "__bool__", "__int__"):
        orig = getattr(torch.Tensor, name)
        def wrapped(self, *a, _orig=orig, _name=name, **k):
            if sys._getframe(1).f_code.co_filename == disentbook.training.trainer.__file__: calls.append(_name)
            return _orig(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, wrapped)
    t.fit()
    assert calls.count("cpu") == 3, calls       # one transfer per log interval
    assert len(calls) <= 3 * 3, calls


# ---------------------------------------------------------------- configs
@pytest.mark.parametrize("kw, msg", [(dict(lr=-1.0), "lr=-1.0 (expected a finite number > 0)"),
                                     (dict(lr=0), "lr=0"), (dict(lr=float("nan")), "lr=nan"), (dict(lr=float("inf")), "lr=inf"),
                                     (dict(steps=0), "steps=0 (expected an integer >= 1)"), (dict(steps=2.5), "steps=2.5"),
                                     (dict(steps=-3), "steps=-3"), (dict(steps="10"), "steps='10'"),
                                     (dict(batch_size=0), "batch_size=0"), (dict(batch_size=8.5), "batch_size=8.5"),
                                     (dict(batch_size=True), "batch_size=True"), (dict(seed=-1), "seed=-1"),
                                     (dict(eps=0.0), "eps=0.0"), (dict(betas=(0.9,)), "betas")])
def test_train_config_rejects_bad_values(kw, msg):
    "Fails before for lr <= 0, non-finite lr, steps 0 / 2.5, float batch sizes: one-line InputError naming the value."
    with pytest.raises(InputError) as e: TrainConfig(**kw)
    assert msg in str(e.value) and "\n" not in str(e.value)

def test_train_config_accepts_whole_floats():
    c = TrainConfig(steps=1e4, batch_size=64.0, lr=1)
    assert (c.steps, c.batch_size, c.lr) == (10_000, 64, 1.0) and type(c.steps) is int

def test_unknown_config_key():
    with pytest.raises(InputError, match=r"unknown TrainConfig key\(s\) \['lr_rate'\]"):
        Trainer(TinyVAE(), ELBO(), TensorSampler(IMAGES), dict(lr_rate=1.0))
    c = TrainConfig(steps=3, betas=(0.5, 0.9), grad_clip=1.0)
    assert TrainConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c

def test_model_without_config():
    with pytest.raises(InputError, match="has no `config` dict"):
        Trainer(nn.Linear(2, 2), ELBO(), TensorSampler(IMAGES), cfg())

def test_sampler_without_sample():
    with pytest.raises(InputError, match="sample"):
        Trainer(TinyVAE(), ELBO(), object(), cfg())

def test_non_scalar_term():
    class Bad(ELBO):
        def forward(self, model, batch, step): return super().forward(model, batch, step) | {"vec": torch.zeros(3)}
    with pytest.raises(InputError, match="'vec' must be a scalar tensor"): trainer(Bad()).fit(1)

def test_config_mismatch(tmp_path):
    t = trainer(ELBO(beta=4.0), steps=2, out_dir=tmp_path).fit()
    ck = tmp_path / "checkpoint"
    with pytest.raises(ConfigMismatchError, match="hidden: checkpoint 32, given 16") as e:
        load_checkpoint(ck, model=TinyVAE(hidden=16))
    assert "zdim" not in str(e.value)
    with pytest.raises(ConfigMismatchError, match="beta: checkpoint 4.0, given 1.0"):
        load_checkpoint(ck, objective=ELBO(beta=1.0))
    with pytest.raises(ConfigMismatchError, match="name"):
        Trainer(TinyVAE(), Factor(), TensorSampler(IMAGES), cfg()).load(ck)
    assert load_checkpoint(ck, TinyVAE(), ELBO(beta=4.0))["config"]["step"] == 2

def test_objective_config_roundtrip():
    f = Factor(gamma=6.4)
    assert f.config == {"name": "test_factor", "gamma": 6.4, "zdim": 3}
    assert make_objective(**f.config).config == f.config
    with pytest.raises(InputError, match="unknown objective 'nope'; known:"): make_objective("nope")


# ---------------------------------------------------------------- checkpoints
def test_checkpoint_layout_and_weights_only(tmp_path):
    t = trainer(steps=12, log_every=4, ckpt_every=4, keep_ckpts=True, out_dir=tmp_path).fit()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "history.csv", "step_0000004", "step_0000008",
                                             "step_0000012"]
    ck = tmp_path / "checkpoint"
    c = json.loads((ck / "config.json").read_text())
    assert sorted(os.listdir(ck)) == ["config.json", c["state_file"]], "exactly the committed state file"
    assert c["step"] == 12 and c["model"] == t.model.config and c["objective"] == t.objective.config
    assert c["train"] == t.config.to_dict() and c["torch_version"] == torch.__version__ and c["format_version"] == 2
    blob = (ck / c["state_file"]).read_bytes()
    assert state_path(ck) == ck / c["state_file"]
    assert c["state_bytes"] == len(blob) and c["state_sha256"] == hashlib.sha256(blob).hexdigest()
    assert c["state_file"] == f"state-0000012-{c['state_sha256'][:12]}.pt"
    state = torch.load(ck / c["state_file"], weights_only=True)
    assert {"model", "objective", "optimizer", "aux_optimizers", "rng", "history", "pending", "keys"} <= set(state)
    hist = pd.read_csv(tmp_path / "history.csv")
    assert hist.step.tolist() == [4, 8, 12] and list(hist.columns) == ["step", "loss", "rec", "kl", "tc", "disc/loss"]
    assert read_checkpoint_config(tmp_path / "step_0000008")["step"] == 8
    assert len(os.listdir(tmp_path / "step_0000008")) == 2
    m = load_model(ck, builder=build, device="cpu")
    assert same(params(m), params(t.model)) and not m.training

def test_missing_and_corrupt_checkpoints(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint at"): load_checkpoint(tmp_path / "none")
    trainer(ELBO(), steps=2, out_dir=tmp_path).fit()
    ck = tmp_path / "checkpoint"
    cfg = read_checkpoint_config(ck); f = ck / cfg["state_file"]
    good = f.read_bytes()
    f.write_bytes(b"not a zip file")
    with pytest.raises(CorruptFileError, match=f"{f.name} is truncated"): load_checkpoint(ck)
    (ck / "config.json").write_text("{trunc")
    with pytest.raises(CorruptFileError, match="not valid JSON"): load_checkpoint(ck)

def test_bit_flip_and_truncation_are_named_errors(tmp_path):
    "Fails before format 2: a flipped bit in a weight loaded silently."
    trainer(ELBO(), steps=2, out_dir=tmp_path).fit()
    ck = tmp_path / "checkpoint"; f = ck / read_checkpoint_config(ck)["state_file"]
    good = f.read_bytes()
    for pos in (len(good) // 3, len(good) - 700):                       # inside the stored tensors
        raw = bytearray(good); raw[pos] ^= 0x01; f.write_bytes(bytes(raw))
        with pytest.raises(CorruptFileError, match=rf"{re.escape(str(f))} is corrupt: its sha256"): load_model(ck, build)
    f.write_bytes(good[:len(good) // 2])
    with pytest.raises(CorruptFileError, match="is truncated"): Trainer.resume(ck, TensorSampler(IMAGES), builder=build)
    f.write_bytes(good)
    c = json.loads((ck / "config.json").read_text()); c["train"]["lr"] = 1.0
    (ck / "config.json").write_text(json.dumps(c))
    with pytest.raises(CorruptFileError, match="config.json is corrupt or was edited"): read_checkpoint_config(ck)

def test_format_1_checkpoints_still_load(tmp_path):
    "A directory written by earlier versions (config.json format 1 + state.pt) loads; an evil pickle in it is refused."
    t = trainer(ELBO(), steps=3, out_dir=tmp_path).fit()
    ck = tmp_path / "checkpoint"; cfg = read_checkpoint_config(ck)
    old = tmp_path / "old"; old.mkdir()
    (ck / cfg["state_file"]).rename(old / "state.pt")
    v1 = {k: v for k, v in cfg.items() if k not in ("state_file", "state_bytes", "state_sha256", "config_sha256")}
    (old / "config.json").write_text(json.dumps(dict(v1, format_version=1)))
    assert same(params(load_model(old, build)), params(t.model))
    r = Trainer.resume(old, TensorSampler(IMAGES), builder=build, steps=5)
    r.fit(); r.save(old)                                                 # the next save writes format 2
    assert read_checkpoint_config(old)["format_version"] == 2 and "state.pt" not in os.listdir(old)
    bad = tmp_path / "evil"; bad.mkdir()
    class Evil:                                # a pickle that would run code when fully unpickled
        def __reduce__(self): return (os.system, ("echo pwned",))
    torch.save({"step": 3, "evil": Evil()}, bad / "state.pt")
    (bad / "config.json").write_text(json.dumps(dict(v1, format_version=1)))
    with pytest.raises(CorruptFileError, match="weights_only"): load_checkpoint(bad, TinyVAE())
    (bad / "config.json").write_text(json.dumps(dict(v1, format_version=7)))
    with pytest.raises(CorruptFileError, match="format_version 1 or 2, found 7"): load_checkpoint(bad)

def test_interrupted_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    t = trainer(ELBO(), steps=4)
    t.fit(2); ck = t.save(tmp_path / "ck")
    t.fit(2)
    def boom(*a, **k): raise OSError("disk full")
    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError, match="disk full"): t.save(tmp_path / "ck")
    assert read_checkpoint_config(ck)["step"] == 2 and os.listdir(tmp_path) == ["ck"]


class Killed(BaseException): "Stands for a kill -9 at a file-system call."

@pytest.mark.parametrize("call", ["replace", "fsync"])
def test_crash_at_every_file_system_call_leaves_a_complete_checkpoint(tmp_path, monkeypatch, call):
    "Stop a save at its k-th os.replace / os.fsync, for every k: the folder always holds the old or the new checkpoint."
    import disentbook.training.trainer as T
    t = trainer(ELBO(), steps=8, out_dir=tmp_path); t.fit(4)
    real = getattr(os, call); k, outcomes = 0, []
    while True:
        k += 1; n = [0]
        def dying(*a, _k=k, **kw):
            n[0] += 1
            if n[0] == _k: raise Killed()
            return real(*a, **kw)
        t.train_step()                                                    # (fit would save at its end)
        monkeypatch.setattr(os, call, dying)
        try: t.save(); done = True
        except Killed: done = False
        finally: monkeypatch.setattr(os, call, real)
        c = read_checkpoint_config(tmp_path / "checkpoint")
        load_checkpoint(tmp_path / "checkpoint", TinyVAE(), ELBO())         # complete and verified
        assert c["step"] in (t.step - 1, t.step) or (k == 1 and c["step"] == 4), (k, c["step"], t.step)
        outcomes.append(c["step"] == t.step)
        if done: break
        t.save()                                                          # commit this step before the next round
    assert k >= 3 and outcomes[-1] and not outcomes[0], outcomes         # the first call keeps the old one


def test_stale_parts_cleaned_on_next_start(tmp_path):
    t = trainer(ELBO(), steps=2, out_dir=tmp_path).fit()
    ck = tmp_path / "checkpoint"; keep = sorted(os.listdir(ck))
    dead = ck / ".state-0000003-aaaaaaaaaaaa.pt.999999999.abcd.part"; dead.write_bytes(b"x")
    orphan = ck / "state-0000003-aaaaaaaaaaaa.pt"; orphan.write_bytes(b"y")     # renamed, never committed
    oldstyle = tmp_path / ".checkpoint.k2j3h4.part"; oldstyle.mkdir(); (oldstyle / "state.pt").write_bytes(b"z")
    live = ck / f".config.json.{os.getpid()}.abcd.part"; live.write_bytes(b"w")   # a live writer's file stays
    trainer(ELBO(), out_dir=tmp_path)
    assert sorted(os.listdir(ck)) == sorted(keep + [live.name]) and not oldstyle.exists()


def test_files_follow_the_umask(tmp_path):
    "Fails before: tempfile's 0600 survived the rename."
    old = os.umask(0o022)
    try: trainer(ELBO(), steps=2, out_dir=tmp_path).fit()
    finally: os.umask(old)
    ck = tmp_path / "checkpoint"
    for f in [tmp_path / "history.csv", *ck.iterdir()]: assert f.stat().st_mode & 0o777 == 0o644, f


# ---------------------------------------------------------------- non-finite weights are never saved
class NaNGradAt9(ELBO):
    "Finite terms at every step; step 9's gradient is NaN (d sqrt(u)/du = inf at u = 0, times 0)."
    def forward(self, model, batch, step):
        out = super().forward(model, batch, step)
        if step == 9: out["loss"] = out["loss"] + torch.sqrt(0 * model.enc[1].weight.sum())
        return out

def test_nan_weights_never_replace_a_good_checkpoint(tmp_path):
    "Fails before: only the logged terms were checked, and the step-10 checkpoint held NaN weights."
    t = trainer(NaNGradAt9(), steps=20, log_every=5, ckpt_every=5, out_dir=tmp_path)
    with pytest.raises(NonFiniteLossError, match=r"model\.enc\.1\.weight holds nan values at step 10.*"
                                                 r"last good checkpoint is step 5"):
        t.fit()
    ck = tmp_path / "checkpoint"
    assert read_checkpoint_config(ck)["step"] == 5 and len(os.listdir(ck)) == 2
    m = load_model(ck, build)
    assert all(torch.isfinite(p).all() for p in m.parameters())

@pytest.mark.parametrize("where, name", [("optimizer", r"optimizer\[model\.dec\.2\.bias\]\.exp_avg_sq"),
                                         ("aux", r"aux_optimizers\.disc\[objective\.aux_nets\.disc\.2\.weight\]\.exp_avg"),
                                         ("aux_net", r"objective\.aux_nets\.disc\.0\.bias")])
def test_non_finite_optimizer_state_or_aux_net_is_not_saved(tmp_path, where, name):
    t = trainer(Factor(), steps=4, out_dir=tmp_path).fit()
    good = read_checkpoint_config(tmp_path / "checkpoint")["step"]
    t.train_step(); t.train_step()
    if where == "optimizer": t.optimizer.state[t.model.dec[2].bias]["exp_avg_sq"][0] = float("inf")
    elif where == "aux": t.aux_optimizers["disc"].state[t.objective.aux_nets["disc"][2].weight]["exp_avg"][0, 0] = float("nan")
    else: t.objective.aux_nets["disc"][0].bias.data[1] = float("nan")
    with pytest.raises(NonFiniteLossError, match=name + rf".*last good checkpoint is step {good}"): t.save()
    assert read_checkpoint_config(tmp_path / "checkpoint")["step"] == good


# ---------------------------------------------------------------- the first batch is validated
@pytest.mark.parametrize("x, hint", [(IMAGES * 255, "x / 255"), (IMAGES * 2 - 1, r"\(x \+ 1\) / 2"),
                                     (IMAGES[:, 0], r"x\[:, None\]"), (IMAGES.permute(0, 2, 3, 1).expand(-1, 8, 8, 3), "permute"),
                                     (IMAGES.long(), "uint8 or floating point")])
def test_first_batch_wrong_images(x, hint):
    "Fails before: 0-255 and [-1, 1] floats trained silently."
    t = Trainer(TinyVAE(), ELBO(), TensorSampler(x), cfg())
    with pytest.raises(InputError, match=r"first batch of TensorSampler, entry 'x'.*" + hint): t.fit()
    assert t.step == 0

def test_first_batch_uint8_is_fine_and_checked_once(monkeypatch):
    calls = []
    real = core.check_images
    monkeypatch.setattr(core, "check_images", lambda x, **k: calls.append(k["name"]) or real(x, **k))
    t = Trainer(TinyVAE(), ELBO(), TensorSampler(IMAGES), cfg(steps=5)).fit()
    assert len(calls) == 1 and t.step == 5


# ---------------------------------------------------------------- seeding
def test_seed_first_gives_identical_runs():
    "Seed, then build the model, then train: the same seed twice gives bit-identical weights and losses on CPU."
    def run(seed):
        core.seed_everything(seed)
        model, objective = TinyVAE(), Factor()
        return Trainer(model, objective, TensorSampler(IMAGES), cfg(seed=seed)).fit()
    a, b, c = run(3), run(3), run(4)
    pd.testing.assert_frame_equal(a.history, b.history, check_exact=True)
    assert same(params(a.model), params(b.model)) and same(params(a.objective), params(b.objective))
    assert not same(params(a.model), params(c.model))
    with pytest.raises(InputError, match="integer >= 0"): core.seed_everything(1.5)


# ---------------------------------------------------------------- gradient separation (FactorVAE-like)
def test_optimizers_hold_disjoint_params():
    class WithPrior(Factor):
        def __init__(self): super().__init__(); self.prior_scale = nn.Parameter(torch.ones(3))
    t = trainer(WithPrior())
    disc = {id(p) for p in t.objective.aux_nets["disc"].parameters()}
    held = lambda opt: {id(p) for g in opt.param_groups for p in g["params"]}
    assert held(t.aux_optimizers["disc"]) == disc
    assert not held(t.optimizer) & disc
    assert held(t.optimizer) == {id(p) for p in t.model.parameters()} | {id(t.objective.prior_scale)}
    g = t.aux_optimizers["disc"].param_groups[0]
    assert g["lr"] == 1e-3 and g["betas"] == (0.5, 0.9)

def test_main_update_leaves_discriminator_alone():
    t = trainer()
    disc = t.objective.aux_nets["disc"]
    before, mbefore = params(disc), params(t.model)
    batch = t.sampler.sample(16, t.generator)
    out = t.main_update(batch, 0)
    assert all(p.grad is None for p in disc.parameters())
    assert same(params(disc), before)
    assert all(p.grad is not None for p in t.model.parameters()) and not same(params(t.model), mbefore)
    # the TC term still sends gradient *through* the discriminator into the encoder
    assert out["tc"].requires_grad

def test_aux_update_leaves_model_alone():
    t = trainer()
    disc = t.objective.aux_nets["disc"]
    batch = t.sampler.sample(16, t.generator)
    out = t.main_update(batch, 0)
    t.model.zero_grad(set_to_none=True)
    mbefore, dbefore = params(t.model), params(disc)
    t.aux_update("disc", batch, out, 0)
    assert all(p.grad is None for p in t.model.parameters())
    assert same(params(t.model), mbefore) and not same(params(disc), dbefore)
    assert all(p.requires_grad for p in t.model.parameters())
    assert not any(p.requires_grad for p in disc.parameters()), "aux nets stay frozen outside their update"

def test_aux_update_keeps_user_frozen_params_frozen():
    model = TinyVAE(); model.dec[0].requires_grad_(False)
    t = trainer(model=model); t.fit(3)
    assert not model.dec[0].weight.requires_grad and model.dec[0].weight.grad is None

def test_roles_oppose():
    "The aux update lowers the discriminator loss on a fixed batch; the main update (TC term) raises it."
    t = trainer(Factor(gamma=50.0))
    x = IMAGES[:64]
    gen = core.make_generator(1)
    idx = torch.rand(64, 3, generator=gen).argsort(0)
    def fixed_loss():
        with torch.no_grad():
            z = t.model.encode(x)[0]
            return disc_loss(t.objective.aux_nets["disc"], z, z.gather(0, idx)).item()
    out = t.main_update({"x": x}, 0)
    start = fixed_loss()
    for s in range(10): t.aux_update("disc", {"x": x}, out, s)
    trained = fixed_loss()
    assert trained < start
    for s in range(10): t.main_update({"x": x}, s)
    assert fixed_loss() > trained


# ---------------------------------------------------------------- misc
def test_grad_clip_logs_grad_norm_and_history_columns():
    t = trainer(ELBO(), grad_clip=1.0, log_every=2, steps=6).fit()
    assert list(t.history.columns) == ["step", "loss", "rec", "kl", "grad_norm"]
    assert t.history.step.tolist() == [2, 4, 6]

def test_history_csv_written(tmp_path):
    t = trainer(ELBO(), steps=7, log_every=3, out_dir=tmp_path).fit()
    h = pd.read_csv(tmp_path / "history.csv")
    assert h.step.tolist() == [3, 6, 7]
    pd.testing.assert_frame_equal(h, t.history, check_dtype=False)


# ---------------------------------------------------------------- the training clock skips stops
@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_a_run_stopped_while_it_trains_does_not_count_the_stop(tmp_path):
    "A child process trains; it is stopped (SIGSTOP) for 6 s mid-fit: its train_seconds leave the stop out."
    import signal, subprocess, textwrap, time
    src = textwrap.dedent(f"""
        import json, sys, time; sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(core.package_dir().parent)!r}]
        from test_train import trainer
        t = trainer(out_dir={str(tmp_path)!r}, steps=10**6, ckpt_every=10**6)
        t.fit(20); print("ready", flush=True)
        w0, s0 = time.perf_counter(), t.train_seconds
        while time.perf_counter() - w0 < 9.0: t.fit(50)
        print(json.dumps(dict(wall=time.perf_counter() - w0, trained=t.train_seconds - s0)), flush=True)""")
    p = subprocess.Popen([sys.executable, "-c", src], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.0); p.send_signal(signal.SIGSTOP); time.sleep(6.0); p.send_signal(signal.SIGCONT)
        r = json.loads(p.stdout.readline()); assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None: p.kill()
    assert r["wall"] >= 9.0 and r["wall"] - 6.5 <= r["trained"] <= r["wall"] - 5.5, r
    c = json.loads((tmp_path / "checkpoint" / "config.json").read_text())
    assert c["train_clock"] == "active" and c["train_seconds"] == pytest.approx(r["trained"], abs=1.0)


def test_a_checkpoint_without_a_clock_record_keeps_saying_so(tmp_path):
    "Training seconds resumed from a checkpoint that did not record its clock stay marked 'wall' (they may count stops)."
    from disentbook.training.checkpoints import write_checkpoint
    trainer(out_dir=tmp_path, steps=20, ckpt_every=10).fit(10)
    ck = tmp_path / "checkpoint"; c = json.loads((ck / "config.json").read_text())
    assert c["train_clock"] == "active"
    blob = (ck / c["state_file"]).read_bytes()
    write_checkpoint(ck, blob, {k: v for k, v in c.items() if k != "train_clock"})   # as an older version wrote it
    t = trainer(out_dir=tmp_path, steps=20, ckpt_every=10).load(ck)
    assert t.train_clock == "wall"
    t.fit(); assert json.loads((ck / "config.json").read_text())["train_clock"] == "wall"


# ---------------------------------------------------------------- the conv layout a run trains in
def test_channels_last_fp32_run_resumes_exactly_and_keeps_its_layout(tmp_path):
    "A conv run asked to train channels-last in fp32 on a CPU: cut and resumed equals straight, bit for bit; the checkpoint"
    " records the layout and a trainer built with the default (None) takes it from there; weights leave `fit` contiguous."
    from disentbook.data.digits import load_digits
    from disentbook.data.samplers import SingleSampler
    from disentbook.nets import VAE
    data = load_digits(n=64)
    def build(cl, out=None, steps=8):
        torch.manual_seed(0)
        cfg = TrainConfig(steps=steps, batch_size=8, lr=1e-3, log_every=2, device="cpu", precision="fp32", progress=False,
                          channels_last=cl)
        return Trainer(VAE(28, 1, 3, hidden=16), make_objective("beta_vae", beta=4.0), SingleSampler(data, device="cpu"), cfg,
                       out_dir=out)
    straight = build(True)
    assert straight.channels_last and not build(None).channels_last
    straight.fit()
    assert all(p.is_contiguous() for p in straight.model.parameters())       # after fit: the default layout again
    cut = build(True, tmp_path / "a"); cut.fit(4); cut.save()
    assert read_checkpoint_config(tmp_path / "a" / "checkpoint")["train"]["channels_last"] is True
    resumed = build(None, tmp_path / "a").load(tmp_path / "a" / "checkpoint")  # the caller's default: the run's layout wins
    assert resumed.channels_last and resumed.config.channels_last is True
    resumed.fit()
    for a, b in zip(straight.model.state_dict().values(), resumed.model.state_dict().values()): assert torch.equal(a, b)
    pd.testing.assert_frame_equal(straight.history, resumed.history, check_exact=True)


# ---------------------------------------------------------------- the precision a run trains in
@pytest.mark.parametrize("began,asked", [("fp32", "bf16"), ("bf16", "fp32"), ("fp32", "auto")])
def test_a_resumed_run_keeps_the_precision_it_began_in(tmp_path, began, asked):
    """A checkpoint records what its run computed in; a trainer that resumes it keeps that precision whatever its own
    config asks (a run begun in fp32 on one machine and resumed where 'auto' means bf16 stays fp32), says why, and its
    next checkpoint says the same. A cut fp32 run resumed so equals the straight run bit for bit."""
    import warnings
    from disentbook.data.digits import load_digits
    from disentbook.data.samplers import SingleSampler
    from disentbook.nets import VAE
    data = load_digits(n=64)
    def build(precision, out=None, steps=8):
        torch.manual_seed(0)
        cfg = TrainConfig(steps=steps, batch_size=8, lr=1e-3, log_every=2, device="cpu", precision=precision, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # bf16 on a CPU without native bf16 warns that it is emulated
            return Trainer(VAE(28, 1, 3, hidden=16), make_objective("beta_vae", beta=4.0), SingleSampler(data, device="cpu"),
                           cfg, out_dir=out)
    cut = build(began, tmp_path / "a"); cut.fit(4); cut.save()
    assert read_checkpoint_config(tmp_path / "a" / "checkpoint")["precision"] == began
    here = build(asked).precision                     # what this machine gives a new run asking for `asked`
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = build(asked, tmp_path / "a").load(tmp_path / "a" / "checkpoint")
    assert resumed.precision == began
    if here != began: assert resumed.precision_reason.startswith(f"the run began in {began}")
    assert resumed.channels_last == (began == "bf16")
    resumed.fit(); assert read_checkpoint_config(tmp_path / "a" / "checkpoint")["precision"] == began
    if began == "fp32":
        straight = build("fp32"); straight.fit()
        for a, b in zip(straight.model.state_dict().values(), resumed.model.state_dict().values()): assert torch.equal(a, b)
