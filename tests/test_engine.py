"""Engine (issue 15): a K-member ensemble equals K separate `Trainer` runs (plain, MWS, adversarial methods), each member's
checkpoint loads alone, NaN stops only its member, the captured step equals eager (CUDA) and falls back on the CPU."""
import warnings

import pytest
import torch

import disentbook  # noqa: F401  (registers every objective)
from disentbook.training.captured import CapturedStep, CaptureError, GraphStep
import disentbook.training.ensemble as ensemble_module
import disentbook.training.fit as fit_module
from disentbook.training.fit import fit_ensemble, fit
from disentbook.training.groups import ensemble_key
from disentbook.core import ConfigMismatchError, InputError, NonFiniteLossError, make_generator
from disentbook.data.base import LabelledImages
from disentbook.data.samplers import SingleSampler
from disentbook.training.config import TrainConfig
from disentbook.training.trainer import Trainer
from disentbook.training.checkpoints import load_checkpoint, load_model, read_checkpoint_config
from disentbook.training.replay import NotReplayableError, RandomReplay
from disentbook.training.ensemble import Ensemble
from disentbook.training.run import build_run, run_specs
from disentbook.objectives.base import make_objective
from training_checks import assert_same_training

MODEL = dict(kind="vae", image_size=28, channels=1, latent_dim=4, hidden=32)
DISC = dict(latent_dim=4, disc_hidden=16, disc_depth=2)
N_DATA = 64


@pytest.fixture(scope="module")
def data():
    g = make_generator(0)
    return LabelledImages((torch.rand(N_DATA, 1, 28, 28, generator=g) > 0.7).to(torch.uint8) * 255,
                          torch.zeros(N_DATA, dtype=torch.long), ["blob"], "random blobs")


def cfg(**kw):
    # fp32: the members are compared with separate Trainer runs, which would take bf16 on a CPU with native bf16
    return TrainConfig(**(dict(steps=10, batch_size=8, lr=1e-3, log_every=5, device="cpu", progress=False, precision="fp32") | kw))


def separate(member, data, config):
    t = build_run(run_specs([{**member, "out_dir": None}], MODEL, config)[0], SingleSampler(data, device="cpu"), data=data)
    return t.fit()


def assert_same_weights(a, b, atol=2e-4):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa: torch.testing.assert_close(sa[k], sb[k], atol=atol, rtol=1e-3, msg=k)


def initial_weights(member, data, config):
    "The weights a run of `member` starts from (build_run seeds the model from the member's seed)."
    t = build_run(run_specs([{**member, "out_dir": None}], MODEL, config)[0], SingleSampler(data, device=config.device), data=data)
    return {k: v.detach().clone() for k, v in t.model.state_dict().items()}


GRIDS = {
    "plain": [dict(objective="beta_vae", params=dict(beta=b), seed=s) for s, b in [(0, 1.0), (1, 4.0), (2, 16.0)]],
    "mws": [dict(objective="beta_tcvae", params=dict(beta=b, dataset_size=N_DATA), seed=s) for s, b in [(3, 1.0), (4, 6.0), (5, 10.0)]],
    "adversarial": [dict(objective="factor_vae", params=dict(gamma=g, **DISC), seed=s) for s, g in [(6, 1.0), (7, 10.0), (8, 35.0)]],
}


@pytest.mark.parametrize("kind", list(GRIDS))
def test_ensemble_equals_separate_runs_and_checkpoints_load_alone(kind, data, tmp_path):
    members = [m | dict(out_dir=tmp_path / f"m{k}") for k, m in enumerate(GRIDS[kind])]
    res = fit_ensemble(run_specs(members, MODEL, cfg()), data)
    for m, r in zip(members, res):
        alone = separate(m, data, cfg())
        assert r["status"] == "ok" and r["steps"] == 10 and r["mode"] == "eager"
        assert list(r["history"].columns) == list(alone.history.columns) and len(r["history"]) == 2
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(alone.history.values), rtol=1e-4, atol=1e-4)
        # Adam moves a weight with a near-zero gradient by up to lr per step whatever the gradient's float noise, so the
        # weights agree to a fraction of lr (1e-3), the logged terms to 1e-6 (measured: 2.8e-4 on one MWS weight)
        assert_same_weights(r["trainer"].model, alone.model, atol=1e-3)
        assert_same_weights(r["trainer"].objective, alone.objective, atol=1e-3)    # the discriminator too (adversarial)
        # the member's checkpoint is an ordinary single-run checkpoint
        ck = m["out_dir"] / "checkpoint"
        assert read_checkpoint_config(ck)["train"]["seed"] == m["seed"]
        assert_same_weights(load_model(ck, device="cpu"), alone.model, atol=1e-3)
        obj = make_objective(m["objective"], **m["params"])
        load_checkpoint(ck, objective=obj)
        assert_same_weights(obj, alone.objective, atol=1e-3)
        assert (m["out_dir"] / "history.csv").is_file()


def test_ensemble_resumes_from_member_checkpoints(data, tmp_path):
    members = [m | dict(out_dir=tmp_path / f"m{k}") for k, m in enumerate(GRIDS["adversarial"][:2])]
    fit_ensemble(run_specs(members, MODEL, cfg(steps=6, log_every=3)), data)
    res = fit_ensemble(run_specs(members, MODEL, cfg(steps=12, log_every=3)), data)   # resumes at step 6
    for m, r in zip(members, res):
        alone = separate(m, data, cfg(steps=12, log_every=3))
        assert_same_weights(r["trainer"].model, alone.model)
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(alone.history.values), rtol=1e-4, atol=1e-4)
    # and a member checkpoint resumes as a plain Trainer
    t = Trainer.resume(members[0]["out_dir"] / "checkpoint", SingleSampler(data, device="cpu"), progress=False)
    assert t.step == 12 and t.config.seed == members[0]["seed"]


def test_nan_stops_only_its_member(data, tmp_path):
    members = [m | dict(out_dir=tmp_path / f"m{k}") for k, m in enumerate(GRIDS["adversarial"])]
    sampler = SingleSampler(data, device="cpu")
    ens = Ensemble([build_run(run_specs([m], MODEL, cfg())[0], sampler, data=data) for m in members])
    with torch.no_grad(): ens.params["model.encoder.fc.2.bias"][1, 0] = float("nan")
    with pytest.warns(UserWarning, match=r"member 1 \(factor_vae.*seed 7\): term 'loss' is nan at step 0"):
        ens.fit()
    s = ens.summaries()
    assert [x["status"] for x in s] == ["ok", "failed", "ok"] and s[1]["error"]["step"] == 0
    assert len(s[1]["history"]) == 0 and s[1]["checkpoint"] is None and not (tmp_path / "m1" / "checkpoint").exists()
    for k in (0, 2):
        assert_same_weights(load_model(tmp_path / f"m{k}" / "checkpoint", device="cpu"), separate(members[k], data, cfg()).model)
    ens2 = Ensemble([build_run(run_specs([{**m, "out_dir": None}], MODEL, cfg())[0], sampler, data=data) for m in members],
                           on_nan="raise")
    with torch.no_grad(): ens2.params["model.encoder.fc.2.bias"][2, 0] = float("inf")
    with pytest.raises(NonFiniteLossError, match=r"member 2 \(factor_vae"): ens2.fit()


def test_captured_step_on_cpu_warns_once_and_equals_trainer(data):
    m = GRIDS["adversarial"][1]
    t = build_run(run_specs([m], MODEL, cfg())[0], SingleSampler(data, device="cpu"), data=data)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cs = CapturedStep(t).fit()
    assert cs.mode == "eager" and len(w) == 1 and "CUDA graphs need a CUDA device" in str(w[0].message)
    alone = separate(m, data, cfg())
    assert_same_weights(t.model, alone.model); assert_same_weights(t.objective, alone.objective)
    assert t.step == 10 and len(t.history) == 2


def test_random_replay_rejects_unsupported_draws():
    with RandomReplay(generator=make_generator(0)):
        with pytest.raises(NotReplayableError, match="bernoulli"): torch.bernoulli(torch.full((4,), 0.5))
        with pytest.raises(NotReplayableError, match="explicit generator"):
            torch.randn(3, generator=make_generator(1))
    plan = [("randn", (2,), torch.float32, torch.device("cpu"))]
    with RandomReplay(plan, [torch.zeros(2)]):
        torch.randn(2)
        with pytest.raises(NotReplayableError, match="no more draws"): torch.rand(2)


def test_members_that_cannot_share_an_ensemble(data):
    s = SingleSampler(data, device="cpu")
    a = build_run(run_specs([GRIDS["adversarial"][0]], MODEL, cfg())[0], s, data=data)
    b = build_run(run_specs([{**GRIDS["adversarial"][1], "params": dict(gamma=10.0, disc_lr=1e-3, **DISC)}], MODEL, cfg())[0], s, data=data)
    with pytest.raises(ConfigMismatchError, match="aux optimizers"): Ensemble([a, b])
    c = build_run(run_specs([GRIDS["mws"][0]], MODEL, cfg())[0], s, data=data)
    d = build_run(run_specs([{**GRIDS["mws"][1], "params": dict(beta=6.0, dataset_size=N_DATA, estimator="mss")}], MODEL, cfg())[0], s, data=data)
    with pytest.raises(ConfigMismatchError, match="estimator"): Ensemble([c, d])
    with pytest.raises(InputError, match="unknown key"): fit_ensemble(run_specs([dict(objective="vae", beta=2)], MODEL, cfg()), data)
    key = lambda m: ensemble_key(run_specs([m], MODEL, cfg())[0])
    assert key(GRIDS["plain"][0]) == key(GRIDS["plain"][2])
    assert key(GRIDS["plain"][0]) != key(GRIDS["adversarial"][0])


def test_fit_keeps_order(data):
    runs = [GRIDS["plain"][0], GRIDS["mws"][0], GRIDS["plain"][1]]
    res = fit(run_specs(runs, MODEL, cfg(steps=4, log_every=2)), data)
    assert [r["objective"] for r in res] == ["beta_vae", "beta_tcvae", "beta_vae"]
    assert [r["seed"] for r in res] == [0, 3, 1] and all(r["status"] == "ok" for r in res)


def test_fast_rng_trains_and_differs_from_exact(data):
    exact = fit_ensemble(run_specs(GRIDS["plain"][:2], MODEL, cfg(steps=4, log_every=2)), data)
    fast = fit_ensemble(run_specs(GRIDS["plain"][:2], MODEL, cfg(steps=4, log_every=2)), data, rng="fast")
    assert all(r["status"] == "ok" for r in fast)
    assert not torch.allclose(torch.tensor(exact[1]["history"].values), torch.tensor(fast[1]["history"].values))


def test_grouped_and_vmapped_convolutions_train_the_same_members(data):
    "The members' convolutions as one grouped channels-last convolution (the default) or by vmap's own rule: one training."
    def run(convs):
        ts = [build_run(run_specs([m], MODEL, cfg(steps=6, log_every=3))[0], SingleSampler(data, device="cpu"), data=data)
              for m in GRIDS["adversarial"][:2]]
        ens = Ensemble(ts, precision="fp32", convs=convs)
        assert ens.convs == (convs or "vmap")
        for _ in range(6): ens.train_step()
        return torch.stack(list(ens._rows)), {n: p.detach().clone() for n, p in ens.params.items()}
    (hg, wg), (hv, wv), (h0, w0) = run("grouped"), run("vmap"), run(None)
    torch.testing.assert_close(hg, hv, rtol=1e-4, atol=1e-4)
    # two kernels: each weight tensor within a quarter of how far training moved it (see training_checks)
    init = {n: p.detach().clone() for n, p in Ensemble(
        [build_run(run_specs([m], MODEL, cfg())[0], SingleSampler(data, device="cpu"), data=data) for m in GRIDS["adversarial"][:2]]).params.items()}
    for n in wg:
        assert (wg[n] - wv[n]).norm() <= 0.25 * (wv[n] - init[n]).norm() + 1e-6, n
        assert torch.equal(w0[n], wv[n]), n                        # the CPU default is vmap's rule
    ts = [build_run(run_specs([GRIDS["plain"][0]], MODEL, cfg())[0], SingleSampler(data, device="cpu"), data=data)]
    with pytest.raises(InputError, match="convs: expected 'grouped' or 'vmap'"): Ensemble(ts, convs="fast")


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
@pytest.mark.parametrize("kind", ["plain", "adversarial"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_captured_equals_eager_on_cuda(kind, precision, data):
    m = GRIDS[kind][1]
    config = cfg(steps=20, log_every=10, device="cuda", batch_size=32)
    out = {}
    for capture in (False, True):
        t = build_run(run_specs([m], MODEL, config)[0], SingleSampler(data, device="cuda"), data=data)
        out[capture] = CapturedStep(t, capture=capture, precision=precision).fit()
    assert out[True].mode == "captured" and out[False].mode == "eager"
    assert_same_training(out[False].trainer.model, out[True].trainer.model, initial_weights(m, data, config))
    # the logged terms: measured at most 1.4e-5 apart (relative) on an H100
    torch.testing.assert_close(torch.tensor(out[False].history(0).values), torch.tensor(out[True].history(0).values),
                               rtol=5e-4, atol=1e-3)


@cuda
def test_eager_and_captured_runs_save_on_cuda(data, tmp_path):
    "Adam keeps its step counters on the CPU unless capturable: the checkpoint's finiteness check gathers across devices."
    config = cfg(steps=4, log_every=2, device="cuda")
    for capture in (False, True):
        m = GRIDS["adversarial"][0] | dict(out_dir=tmp_path / f"c{int(capture)}")
        t = build_run(run_specs([m], MODEL, config)[0], SingleSampler(data, device="cuda"), data=data)
        CapturedStep(t, capture=capture, precision="bf16").fit()
        assert (m["out_dir"] / "checkpoint").exists()
        load_checkpoint(m["out_dir"] / "checkpoint")


@cuda
def test_captured_ensemble_equals_separate_runs_on_cuda(data):
    config = cfg(steps=20, log_every=10, device="cuda", batch_size=32, amp=False)
    res = fit_ensemble(run_specs(GRIDS["adversarial"], MODEL, config), data, capture=True, precision="fp32")
    assert all(r["mode"] == "captured" for r in res)
    for m, r in zip(GRIDS["adversarial"], res):
        t = build_run(run_specs([m], MODEL, config)[0], SingleSampler(data, device="cuda"), data=data)
        torch.backends.cudnn.allow_tf32 = False
        try: t.fit()
        finally: torch.backends.cudnn.allow_tf32 = True
        assert_same_training(r["trainer"].model, t.model, initial_weights(m, data, config))
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(t.history.values), rtol=5e-4, atol=1e-3)


# the CUDA default of the `gpu` scale is bf16 autocast + vmap: on a CPU the engine's autocast is off, so the test switches
# it to CPU bf16 (the same dtype path: the draws are recorded on member 0 outside vmap, where the code is bf16, and replayed
# inside it). Before the replay compared dtypes, every objective sampling through VAE.forward broke at step 1 and was
# silently retrained member by member.
BF16_ENSEMBLE = {"beta_vae": {}, "vae": {}, "dip_vae_i": {}, "dip_vae_ii": {}, "beta_tcvae": {}, "annealed_vae": {},
                 "wae_mmd": dict(latent_dim=4), "factor_vae": DISC, "tcwae_mws": dict(latent_dim=4),
                 "tcwae_gan": dict(latent_dim=4, disc_hidden=16)}


@pytest.mark.parametrize("objective", sorted(BF16_ENSEMBLE))
def test_bf16_ensembles_replay_their_draws_without_falling_back(objective, data, monkeypatch):
    from disentbook.objectives.base import OBJECTIVES
    params = {k: v for k, v in BF16_ENSEMBLE[objective].items() if k in OBJECTIVES[objective].params}
    monkeypatch.setattr(ensemble_module, "autocast_context", lambda precision, device, amp: torch.autocast("cpu", dtype=torch.bfloat16,
                                                                                             cache_enabled=False))
    members = [dict(objective=objective, params=params, seed=s) for s in (0, 1)]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*one by one.*")
        res = fit(run_specs(members, MODEL, cfg(steps=3, log_every=1)), data)
    assert all("fallback" not in r and r["members"] == 2 for r in res), [r.get("fallback") for r in res]
    assert all(torch.isfinite(torch.tensor(r["history"]["loss"].to_numpy())).all() for r in res)


def test_a_fallback_to_single_models_is_never_silent(data, monkeypatch):
    "A group whose step cannot be vmapped trains member by member with a warning and `fallback` in every summary."
    def refuse(*a, **k): raise NotReplayableError("a stand-in refusal")
    monkeypatch.setattr(fit_module, "fit_ensemble", refuse)
    members = [dict(objective="beta_vae", seed=s) for s in (0, 1)]
    with pytest.warns(UserWarning, match="one by one"):
        res = fit(run_specs(members, MODEL, cfg(steps=2, log_every=1)), data)
    assert all(r["fallback"].startswith("ensemble -> single models") for r in res)
    with pytest.raises(CaptureError, match="forbids the fallback"):
        fit(run_specs(members, MODEL, cfg(steps=2, log_every=1)), data, strict=True)


def test_a_failed_capture_restores_the_stream_and_falls_back(monkeypatch):
    """As far as a CPU can show it: when the graph's capture raises on exit (as `capture_end` does on an invalid capture,
    leaving torch.cuda.graph's side stream current), `_capture` puts the step's own stream back, drops the graph and
    falls back to eager with the reason recorded."""
    import contextlib
    from types import SimpleNamespace
    current = ["step stream"]
    @contextlib.contextmanager
    def graph(g):
        current[0] = "capture stream"
        yield
        raise RuntimeError("operation not permitted when stream is capturing")      # capture_end; the stream is not restored
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: current[0])
    monkeypatch.setattr(torch.cuda, "set_stream", lambda s: current.__setitem__(0, s))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(torch.cuda, "graph", graph)
    why = []
    self = SimpleNamespace(_optimizers=lambda: [], _static=("inputs",), mode="capturing", _graph=None,
                           _fallback=lambda w, **k: (why.append(w), setattr(self, "mode", "eager")))
    GraphStep._capture(self, lambda step: torch.zeros(3), 5)
    assert current[0] == "step stream" and self._graph is None and self._static is None and self.mode == "eager"
    assert "capturing the step failed (RuntimeError: operation not permitted" in why[0] and self.capture_error.startswith("RuntimeError")
