"""Issue 22 (items 1-2): every paper on the engine and the defects that crashed or slowed it, each tested on the CPU
where a CPU can show it (the CUDA-only graph itself: `cuda` tests at the end, skipped without a GPU)."""
import contextlib, json, warnings
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import disentbook  # noqa: F401  (registers every objective)
from disentbook.training.captured import CapturedStep, CaptureError
from disentbook.training.fit import fit_ensemble, fit, fit_single
from disentbook.training.groups import ensemble_key
from disentbook.core import REPRODUCTIONS, ConfigMismatchError, InputError, make_generator
from disentbook.data.base import LabelledImages
from disentbook.data.samplers import SingleSampler
from disentbook.nets import VAE
from disentbook.objectives.base import OBJECTIVES, register_objective
from disentbook.objectives.vae import BetaVAE
from disentbook.repro.declare import Metric, PAPERS, Paper, Table, scale_config
from disentbook.repro.figures import Context
from disentbook.repro.harness import register_reproduction, reproduction_jobs
from disentbook.repro.runs import HARNESS_OPTIONS, group_jobs, train_ensembles
from disentbook.training.config import TrainConfig, precision_flags
import disentbook.training.trainer as trainer_module
from disentbook.training.run import model_spec, build_run, run_specs
from disentbook.training.replay import HostReadError, NoHostReads, step_support
from disentbook.training.checkpoints import write_checkpoint
from disentbook.training.ensemble import Ensemble, StaticHparamError
from disentbook.objectives.base import make_objective
from training_checks import assert_same_training

MODEL = dict(kind="vae", image_size=28, channels=1, latent_dim=4, hidden=32)


# objectives that exercise one engine path each (registered for this module only)
class _Drop(BetaVAE):
    "Dropout on the codes: not replayable per member, so not vmapped; a captured single model."
    def regularizer(self, model, batch, out, terms, step):
        d = F.dropout(out["mu"], 0.5, self.training).pow(2).mean()
        return 0.1 * d, dict(drop=d)

class _Perm(BetaVAE):
    "randperm and randint draws: replayed per member (each member draws what its separate run draws)."
    def regularizer(self, model, batch, out, terms, step):
        mu = out["mu"]
        p = torch.randperm(len(mu), device=mu.device)
        j = torch.randint(0, mu.shape[1], (len(mu),), device=mu.device)
        d = (mu - mu[p]).pow(2).mean() + mu.gather(1, j[:, None]).pow(2).mean()
        return 0.1 * d, dict(perm=d)

class _Host(BetaVAE):
    "A host read in the step (`.item()`): neither vmapped nor captured."
    def regularizer(self, model, batch, out, terms, step):
        m = out["mu"].abs().mean()
        return (0.1 if m.item() > 0 else 0.0) * m, dict(m=m)

class _AuxStep(BetaVAE):
    "The main terms ignore the step; the aux net's loss reads it in Python control flow (no capture)."
    def __init__(self, beta: float = 1.0):
        super().__init__(beta=beta); self.aux_nets["d"] = nn.Linear(4, 1)
    def aux_loss(self, name, model, batch, out, step):
        loss = self.aux_nets["d"](out["_mu"]).pow(2).mean()
        return dict(loss=loss * 2 if step >= 5 else loss)
    def regularizer(self, model, batch, out, terms, step):
        return 0.0, {"_mu": out["mu"].detach()}

class _Tf32(torch.autograd.Function):
    "Identity that records, during backward, whether cuDNN may use TF32."
    seen: list = []
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x.view_as(x)
    @staticmethod
    def setup_context(ctx, inputs, output): pass
    @staticmethod
    def backward(ctx, g):
        _Tf32.seen.append((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)); return g

class _Prec(BetaVAE):
    def regularizer(self, model, batch, out, terms, step):
        d = _Tf32.apply(out["mu"]).pow(2).mean()
        return 0.01 * d, dict(p=d)

TEST_OBJECTIVES = {"t_drop": _Drop, "t_perm": _Perm, "t_host": _Host, "t_auxstep": _AuxStep, "t_prec": _Prec}


@pytest.fixture(scope="module", autouse=True)
def objectives():
    for name, cls in TEST_OBJECTIVES.items(): register_objective(name)(cls)
    yield
    for name in TEST_OBJECTIVES: del OBJECTIVES[name]


@pytest.fixture(scope="module")
def data():
    g = make_generator(0)
    return LabelledImages((torch.rand(64, 1, 28, 28, generator=g) > 0.7).to(torch.uint8) * 255,
                          torch.zeros(64, dtype=torch.long), ["blob"], "random blobs")


def cfg(**kw):
    # fp32: the members are compared with separate Trainer runs, which would take bf16 on a CPU with native bf16
    return TrainConfig(**(dict(steps=6, batch_size=8, lr=1e-3, log_every=3, device="cpu", progress=False, precision="fp32") | kw))


def run(member, data, config=None):
    return build_run(run_specs([member], MODEL, config or cfg())[0], SingleSampler(data, device="cpu"), data=data)


def close_weights(a, b, atol=1e-3):
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values()): torch.testing.assert_close(p, q, atol=atol, rtol=1e-3, msg=k)


# --- what the engine can do with a step: decided on the CPU --------------------------------------------------------

def test_step_support_decides_vmap_capture_and_static_hyperparameters(data):
    s = lambda name, vary=(), **p: step_support(run(dict(objective=name, params=p), data), vary=vary)
    assert s("beta_vae") | {} == dict(replay=None, host=None, step="none", static=[], vmap=True, capture=True, host_stage=None, why=None)
    d = s("t_drop"); assert not d["vmap"] and d["capture"] and "dropout" in d["replay"]
    h = s("t_host"); assert not h["vmap"] and not h["capture"] and "item" in h["host"] and "test_engine_papers.py" in h["host"]
    assert s("t_perm")["vmap"]                                                   # randperm / randint are replayed
    a = s("t_auxstep"); assert a["step"] == "python" and not a["capture"]         # the aux loss counts too
    assert s("annealed_vae", iteration_threshold=10)["step"] == "tensor"          # a device step counter drives it
    assert s("dip_vae_ii", vary=["lambda_3", "lambda_od"])["static"] == ["lambda_3"]   # `if lambda_3 <= 0` in Python


def test_dip_vae_lambda3_0_and_200_train_in_separate_ensembles(data):
    members = [dict(objective="dip_vae_ii", params=dict(lambda_od=5.0, lambda_3=l3), seed=s) for s, l3 in [(0, 0.0), (1, 200.0), (2, 0.0)]]
    with pytest.raises(StaticHparamError, match="lambda_3"):
        Ensemble([run(m, data) for m in members])
    assert ensemble_key(run_specs(members, MODEL, cfg())[0]) == ensemble_key(run_specs(members, MODEL, cfg())[1])   # one key: the split comes from the probe
    res = fit(run_specs(members, MODEL, cfg()), data)
    assert [r["members"] for r in res] == [2, 1, 2] and all(r["status"] == "ok" for r in res)
    assert "third" in res[1]["history"] and "third" not in res[0]["history"]
    for m, r in zip(members, res): close_weights(r["trainer"].model, run(m, data).fit().model)


def test_randperm_and_randint_are_replayed_per_member(data):
    members = [dict(objective="t_perm", params=dict(beta=b), seed=s) for s, b in [(0, 1.0), (1, 4.0)]]
    res = fit_ensemble(run_specs(members, MODEL, cfg()), data)
    for m, r in zip(members, res):
        alone = run(m, data).fit()
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(alone.history.values), rtol=1e-4, atol=1e-4)
        close_weights(r["trainer"].model, alone.model)


def test_unvmappable_groups_train_as_single_models_and_only_they(data):
    members = [dict(objective="t_drop", params=dict(beta=1.0), seed=0), dict(objective="beta_vae", params=dict(beta=1.0), seed=1),
               dict(objective="t_drop", params=dict(beta=4.0), seed=2), dict(objective="beta_vae", params=dict(beta=4.0), seed=3)]
    res = fit(run_specs(members, MODEL, cfg()), data)
    assert [r["members"] for r in res] == [1, 2, 1, 2]                   # the refusal is the dropout group's only
    assert all(r["mode"] == "eager" and "CUDA graphs need a CUDA device" in r["why"] for r in res)
    for m, r in zip(members, res): close_weights(r["trainer"].model, run(m, data).fit().model, atol=1e-5 if m["objective"] == "t_drop" else 1e-3)


def test_captured_step_on_cpu_is_the_trainer_and_says_why(data):
    m = dict(objective="t_drop", params=dict(beta=2.0), seed=5)
    t = run(m, data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                   # capture=None on a CPU: no warning
        cs = CapturedStep(t, capture=None).fit()
    assert cs.mode == "eager" and "CUDA graphs need a CUDA device" in cs.reason
    alone = run(m, data).fit()
    close_weights(t.model, alone.model, atol=0)
    assert t.history.equals(alone.history)


# --- defects -----------------------------------------------------------------------------------------------------

def test_a_failed_capture_is_recorded_and_strict_refuses_it(data):
    ens = Ensemble([run(dict(objective="beta_vae", params=dict(beta=1.0)), data)])
    with pytest.warns(UserWarning, match="capturing the step failed"):
        ens._capture(lambda s: 1 / 0, 0)                               # what a failing capture runs into
    assert ens.mode == "eager" and ens.capture_error and ens.reason.startswith("capturing the step failed")
    strict = Ensemble([run(dict(objective="beta_vae", params=dict(beta=1.0)), data)], strict=True)
    with pytest.raises(CaptureError, match="allow_eager"): strict._capture(lambda s: 1 / 0, 0)


def test_final_checkpoint_is_written_once(data, tmp_path, monkeypatch):
    writes = []
    real = write_checkpoint
    monkeypatch.setattr(trainer_module, "write_checkpoint", lambda path, *a, **k: (writes.append(str(path)), real(path, *a, **k))[1])
    m = dict(objective="beta_vae", params=dict(beta=1.0), seed=0, out_dir=tmp_path / "e")
    fit_ensemble(run_specs([m], MODEL, cfg(ckpt_every=3)), data)             # steps 3 and 6, the last one periodic
    assert len(writes) == 2, writes
    writes.clear()
    fit_single(run_specs([{**m, "out_dir": tmp_path / "s"}], MODEL, cfg(ckpt_every=3))[0], data)
    assert len(writes) == 2, writes


def test_fp32_is_strict_in_backward_too_and_cudnn_benchmark_on_cuda(data):
    _Tf32.seen.clear()
    Ensemble([run(dict(objective="t_prec", params=dict(beta=1.0)), data)], precision="fp32").fit(1)
    assert _Tf32.seen and all(s == (False, False) for s in _Tf32.seen)   # TF32 off while the backward runs
    _Tf32.seen.clear()
    CapturedStep(run(dict(objective="t_prec", params=dict(beta=1.0)), data), capture=None, precision="tf32").fit(1)
    assert _Tf32.seen == [(True, True)]
    before = torch.backends.cudnn.benchmark
    with precision_flags(None, "cuda"): assert torch.backends.cudnn.benchmark
    with precision_flags(None, "cpu"): assert torch.backends.cudnn.benchmark == before
    assert torch.backends.cudnn.benchmark == before
    with pytest.raises(InputError, match="precision"): precision_flags("fp16", "cpu").__enter__()


def test_trainer_fit_runs_under_precision_flags(data, monkeypatch):
    seen = []
    real = precision_flags
    monkeypatch.setattr(trainer_module, "precision_flags", lambda p, d: (seen.append((p, str(d))), real(p, d))[1])
    run(dict(objective="beta_vae", params=dict(beta=1.0)), data).fit(1)
    assert seen == [(None, "cpu")]


def test_logged_terms_live_on_the_loss_device_annealed_vae():
    "On the meta device (no data, shapes only) a term made on the CPU shows: AnnealedVAE's capacity was `torch.tensor(c)`."
    from disentbook.objectives.base import make_objective
    model = VAE(28, 1, 4, hidden=32).to("meta")
    obj = make_objective("annealed_vae", iteration_threshold=10).to("meta")
    x = torch.empty(4, 1, 28, 28, device="meta")
    for step in (3, torch.tensor(3, device="meta")):
        out = obj(model, {"x": x}, step)
        for k, v in out.items():
            assert isinstance(v, torch.Tensor) and v.device == out["loss"].device and v.dtype == torch.float32, (k, v.device)
    assert obj.capacity(5) == pytest.approx(12.5) and float(obj.capacity(torch.tensor(20))) == 25.0


def test_single_sampler_makes_no_host_copy_per_batch():
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 4), posY=range(0, 32, 4))
    s = SingleSampler(small, device="cpu", materialize=True)
    with mock.patch("torch.tensor", side_effect=AssertionError("torch.tensor(list, device=...) per batch")):
        a = s.sample(16, make_generator(3))
    f = small.sample_factors(16, make_generator(3))                      # the numbers of the library's own path
    assert torch.equal(a["factors"], f) and torch.equal(a["x"], small.sample_observations_from_factors(f).float() / 255)


def test_pair_sampler_makes_no_host_copy_or_sync_per_batch():
    from disentbook.data.colored_mnist import ColoredMNIST, PairSampler
    d = ColoredMNIST("train", "auto")
    s = PairSampler(d, k=(1, 2), device="cpu")
    s.sample(4, make_generator(0))
    with mock.patch("torch.tensor", side_effect=AssertionError("torch.tensor per batch")), NoHostReads():
        a = s.sample(8, make_generator(1))
    assert torch.equal(a["factors"], d.sample_factors(8, make_generator(1)))


def test_mss_weights_are_built_once_on_the_device():
    from disentbook.objectives.tcwae import mss_log_weights
    a, b = mss_log_weights(6, 100), mss_log_weights(6, 100)
    assert a is b                                                         # cached: no new matrix (nor copy) per forward
    torch.testing.assert_close(a.exp().sum(1), torch.ones(6))
    assert mss_log_weights(6, 100, device="meta").device.type == "meta"  # made there, not on the CPU and copied
    with mock.patch("torch.full", side_effect=AssertionError("rebuilt")): mss_log_weights(6, 100)


# --- the harness: every paper's groups on the engine, the mode in eval.json, allow_eager -----------------------

def _toy_model(spec, data, cfg): return VAE(64, 1, 4, hidden=32)

@pytest.fixture(scope="module")
def paper():
    from disentbook.data.colored_mnist import PairSampler
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    rows = (model_spec("G", "ada_gvae", "G"), model_spec("D", "t_drop", "D"),
            model_spec("L0", "dip_vae_ii", "L0", lambda_3=0.0), model_spec("L200", "dip_vae_ii", "L200", lambda_3=200.0),
            model_spec("H", "t_host", "H"))
    p = Paper(name="toy_engine_pairs", title="Toy pairs",
                scales=dict(quick=dict(seeds=2, train=dict(steps=3, batch_size=8, log_every=1)),
                            gpu=dict(seeds=2, train=dict(steps=3, batch_size=8, log_every=1))),
                tables=(Table("T", "small", rows, (Metric("w", "w"),)),),
                data=lambda name, cfg, seed, options: small, model=_toy_model,
                evaluate=lambda model, data, cfg, seed, spec: dict(w=float(next(model.parameters()).detach().sum())),
                sampler=lambda d, device: PairSampler(d, k=1, nuisance=["posX", "posY"], device=device))
    fn = register_reproduction(p)
    yield p, fn
    del REPRODUCTIONS[p.name], PAPERS[p.name]


def _jobs(p, tmp_path, scale="quick", device="cpu", **options):
    cfg = scale_config(p, scale)
    ctx = Context(p, scale, cfg, tmp_path, torch.device("cpu"), {**HARNESS_OPTIONS, **options, "scale": scale}, [0, 1])
    jobs, _ = reproduction_jobs(p, ctx, cfg, tmp_path, device)
    return jobs


def test_group_jobs_predicts_groups_and_modes(paper, tmp_path):
    p, _ = paper
    jobs = _jobs(p, tmp_path)
    g = {(x["objective"], tuple(x["jobs"])): x for x in group_jobs(jobs, device="cuda")}
    by = {x["objective"]: [] for x in g.values()}
    for x in g.values(): by[x["objective"]].append(x)
    assert [x["mode"] for x in by["ada_gvae"]] == ["captured_ensemble"] and by["ada_gvae"][0]["members"] == 2
    assert [x["mode"] for x in by["t_drop"]] == ["captured_single"] and "dropout" in by["t_drop"][0]["why"]
    assert [x["mode"] for x in by["t_host"]] == ["eager"] and "item" in by["t_host"][0]["why"]
    dip = by["dip_vae_ii"]                                               # λ_3 = 0 and 200: two ensembles, never one vmap
    assert len(dip) == 2 and all(x["members"] == 2 and x["mode"] == "captured_ensemble" and "lambda_3" in x["why"] for x in dip)
    assert {jobs[i]["spec"]["params"]["lambda_3"] for x in dip for i in x["jobs"][:1]} == {0.0, 200.0}
    x = by["ada_gvae"][0]
    assert x["family"] == "conv64_vae" and x["train"]["steps"] == 3 and x["model_config"]["kind"] == "vae" and "seed" not in x["train"]
    assert all(x["mode"] == "eager" for x in group_jobs(jobs))         # on the jobs' own device, the CPU


def test_paper_samplers_train_on_the_engine_with_their_mode_in_eval_json(paper, tmp_path, monkeypatch):
    p, fn = paper
    # fp32 for both runners: on a CPU the engine's vmapped ensembles train in fp32, the Trainer would take bf16
    a = fn("quick", out_dir=tmp_path / "one", device="cpu", runner="local", precision="fp32")["results"]["T"]
    def no_single_runs(job): raise AssertionError("the ensemble runner fell back to train_run")
    from disentbook.repro import runs as R_
    monkeypatch.setattr(R_, "train_run", no_single_runs)          # the runner lives in repro.runs
    b = fn("quick", out_dir=tmp_path / "ens", device="cpu", runner="ensemble", precision="fp32")["results"]["T"]
    for row in ("G", "D", "L0", "L200", "H"):
        for ra, rb in zip(a[row], b[row]):
            assert abs(ra["w"] - rb["w"]) < 1e-3 * max(1.0, abs(ra["w"])), (row, ra["w"], rb["w"])
            assert ra["mode"]["mode"] == "eager" and ra["mode"]["members"] == 1 and ra["mode"]["precision"] == "fp32"
    ev = lambda slug: json.loads((tmp_path / "ens" / "runs" / "small" / slug / "seed1" / "eval.json").read_text())
    g, d = ev("ada_gvae"), ev("t_drop")
    assert g["mode"]["mode"] == "eager" and g["mode"]["members"] == 2 and "CUDA graphs need a CUDA device" in g["mode"]["why"]
    assert d["mode"]["members"] == 1 and "dropout" in d["mode"]["why"]
    m = g["metrics"]
    assert m["train_members"] == 2 and m["train_seconds_member_share"] == pytest.approx(m["train_seconds"] / 2)
    assert b["G"][0]["mode"] == g["mode"]                                # and in the results the harness returns


def test_gpu_scale_refuses_an_eager_fallback_unless_allowed(paper, tmp_path):
    p, fn = paper
    jobs = [j for j in _jobs(p, tmp_path, "gpu", "cuda") if j["spec"]["objective"] == "t_host"]
    with pytest.raises(CaptureError, match=r"t_host on small .*item.*allow_eager=true"):
        train_ensembles(jobs)                                          # refused before anything trains (or needs CUDA)
    with pytest.raises(InputError, match=r"has no option bogus; it accepts: .*allow_eager"):
        fn("quick", out_dir=tmp_path / "x", device="cpu", bogus=1)


# --- CUDA: the graph itself ----------------------------------------------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
@pytest.mark.parametrize("name,params", [("t_drop", dict(beta=2.0)), ("annealed_vae", dict(iteration_threshold=10))])
def test_captured_single_equals_eager_on_cuda(name, params, data):
    "Dropout (the graph's own RNG) and a step-dependent objective (the device step counter) captured = eager."
    config = cfg(steps=12, device="cuda", amp=False)
    out = {}
    for capture in (False, True):
        t = build_run(run_specs([dict(objective=name, params=params, seed=3)], MODEL, config)[0], SingleSampler(data, device="cuda"), data=data)
        out[capture] = CapturedStep(t, capture=capture, precision="fp32").fit()
    assert out[True].mode == "captured" and out[False].mode == "eager"
    m = dict(objective=name, params=params, seed=3)
    init = build_run(run_specs([m], MODEL, config)[0], SingleSampler(data, device="cuda"), data=data).model.state_dict()
    assert_same_training(out[False].trainer.model, out[True].trainer.model, init)
    # measured on an H100 (annealed_vae, every step logged): the first step's terms equal, the rest within 6e-5 (relative)
    torch.testing.assert_close(torch.tensor(out[False].history().values), torch.tensor(out[True].history().values), rtol=5e-4, atol=1e-3)


@cuda
def test_captured_ensemble_with_a_device_step_counter_on_cuda(data):
    members = [dict(objective="annealed_vae", params=dict(iteration_threshold=10, gamma=g), seed=s) for s, g in [(0, 10.0), (1, 100.0)]]
    res = fit_ensemble(run_specs(members, MODEL, cfg(steps=12, device="cuda", amp=False)), data, precision="fp32", strict=True)
    assert all(r["mode"] == "captured" for r in res)
    for m, r in zip(members, res):
        t = build_run(run_specs([m], MODEL, cfg(steps=12, device="cuda", amp=False))[0], SingleSampler(data, device="cuda"), data=data)
        with precision_flags("fp32", "cuda"): t.fit()
        close_weights(r["trainer"].model, t.model, atol=1e-3)


@cuda
def test_strict_refuses_eager_on_cuda(data):
    t = build_run(run_specs([dict(objective="t_host", params={})], MODEL, cfg(device="cuda"))[0], SingleSampler(data, device="cuda"), data=data)
    with pytest.raises(CaptureError, match="item"): CapturedStep(t, capture=None, strict=True)


def test_a_scheduled_pair_sampler_follows_the_step_in_ensembles_and_after_resume(tmp_path):
    "The pair sampler's warm-up by difficulty counts steps: each member has its own, set to the run's step before each draw."
    from disentbook.data.colored_mnist import PairSampler
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 10))
    sampler = lambda device: PairSampler(small, k="random", nuisance=["posX", "posY", "orientation"], warmup_steps=4, device=device)
    model, c = dict(kind="vae", image_size=64, channels=1, latent_dim=4, hidden=32), cfg(steps=6, log_every=2)
    members = [dict(objective="ada_gvae", params=dict(beta=b), seed=s) for s, b in [(0, 1.0), (1, 2.0)]]
    res = fit_ensemble(run_specs(members, model, c), small, sampler=sampler)
    for m, r in zip(members, res):
        alone = build_run(run_specs([m], model, c)[0], sampler("cpu"), data=small).fit()
        assert r["trainer"].sampler.step == alone.sampler.step == 6          # its own sampler: 6 draws
        cols = [k for k in alone.history if k != "n_shared"]                 # a count: float noise may flip one pair
        # the vmapped and the separate step sum in different orders: the KL (about 0.1) differs by up to 1.6e-4 (measured,
        # torch 2.15), the losses by 3e-4 on 6,400
        torch.testing.assert_close(torch.tensor(r["history"][cols].values), torch.tensor(alone.history[cols].values), rtol=1e-4, atol=1e-3)
    # resumed at step 3 (a fresh sampler, step 0): the next draw is step 3's
    m = {**members[0], "out_dir": tmp_path / "r"}
    build_run(run_specs([m], model, cfg(steps=3, log_every=3))[0], sampler("cpu"), data=small).fit()
    t = build_run(run_specs([m], model, c)[0], sampler("cpu"), data=small)
    t.draw(); assert t.sampler.step == 4 and t.step == 3


def test_every_invariance_group_is_captured_at_gpu(tmp_path):
    """The paper's own objective reaches the captured ensemble at `gpu` (SupCon's mean over anchors with a positive and
    the top-k mask read nothing on the host), VFAE too (its group MMD from one-hot weights, no `unique`); UAI's dropout
    makes it a captured single model; nothing is eager."""
    p = PAPERS["invariance"]; cfg = scale_config(p, "gpu")
    ctx = Context(p, "gpu", cfg, tmp_path, torch.device("cpu"), {**p.options, "scale": "gpu"}, list(range(int(cfg["seeds"]))))
    jobs, _ = reproduction_jobs(p, ctx, cfg, tmp_path, torch.device("cpu"))
    g = {x["objective"]: x for x in group_jobs(jobs, device="cuda")}
    assert g["swap_invariance"]["mode"] == "captured_ensemble" and g["swap_invariance"]["members"] == int(cfg["seeds"])
    assert g["vfae"]["mode"] == "captured_ensemble"
    assert g["uai"]["mode"] == "captured_single" and "dropout" in g["uai"]["why"]
    assert not [x for x in g.values() if x["mode"] == "eager"]


# --- issue 22, what remained: the contrastive paper and VFAE on the engine --------------------------------------------

CMODEL = dict(kind="contrastive_vae", image_size=28, channels=1, z_dim=4, s_dim=2, hidden=16)


@pytest.fixture(scope="module")
def tb():
    "Random target and background images: what the contrastive objectives train on (a target/background sampler)."
    from disentbook.data.samplers import TargetBackgroundSampler
    g = make_generator(1)
    img = lambda n: LabelledImages((torch.rand(n, 1, 28, 28, generator=g) > 0.6).to(torch.uint8) * 255,
                                   torch.zeros(n, dtype=torch.long), ["blob"], "random blobs")
    t, b = img(48), img(48)
    return lambda device="cpu": TargetBackgroundSampler(t, b, device=device)


def _crun(name, tb, seed=0, **params):
    return build_run(run_specs([dict(objective=name, params=params, seed=seed)], CMODEL, cfg(batch_size=8))[0], tb())


@pytest.mark.parametrize("name", ["contrastive_vae", "contrastive_w2_dirac", "cvae"])
def test_contrastive_steps_are_capturable_their_w2_monitored_outside_the_step(name, tb):
    "The logged exact W2 left the step: the step reads nothing back (vmap, capture), the W2 is logged at log cadence."
    s = step_support(_crun(name, tb))
    assert s["vmap"] and s["capture"] and s["host"] is None and s["host_stage"] is None, s
    t = _crun(name, tb).fit()
    h = t.history
    assert list(h.columns)[-1] == "w2" and len(h) == 2
    # an independent W2 (POT's emd2 in float64) of the codes of the monitor's own batch, drawn as documented
    import ot
    g = make_generator(1_000_003 * (t.config.seed + 1) + t.step)
    from disentbook.objectives.contrastive import contrastive_terms
    with torch.no_grad():
        batch = t.sampler.sample(t.config.batch_size, g)
        c = contrastive_terms(t.model, batch["x"], batch["y"], t.objective.beta, g)
    zx, zy = c["z_x"].double().numpy(), c["z_y"].double().numpy()
    n = len(zx)
    ref = ot.emd2(torch.full((n,), 1 / n).double().numpy(), torch.full((n,), 1 / n).double().numpy(), ot.dist(zx, zy))
    assert h["w2"].iloc[-1] == pytest.approx(ref, rel=1e-5)
    # monitoring changes nothing in training: the same run without it has the same weights and step terms
    u = build_run(run_specs([dict(objective=name, params=dict(monitor_w2=False), seed=0)], CMODEL, cfg(batch_size=8))[0], tb()).fit()
    assert "w2" not in u.history.columns
    torch.testing.assert_close(torch.tensor(u.history.values), torch.tensor(h.drop(columns="w2").values))
    close_weights(t.model, u.model, atol=0)


def test_contrastive_w2_prepared_plan_gives_the_eager_step_and_reads_nothing_back(tb):
    "Eq. 8's host stage: with `prepare`'s draws and plan the forward is the eager one (terms and gradients), host-free."
    from disentbook.objectives.contrastive import ContrastiveW2
    t = _crun("contrastive_w2", tb)
    obj, model = t.objective, t.model
    batch = t.sampler.sample(8, make_generator(3))
    def step(prepared):
        model.zero_grad(set_to_none=True); torch.manual_seed(5)
        b = batch
        if prepared:
            with torch.no_grad(): b = {**batch, **obj.prepare(model, batch)}
        with NoHostReads() if prepared else contextlib.nullcontext(): out = obj(model, b, 0)
        out["loss"].backward()
        return {k: v.detach() for k, v in out.items() if k == "loss" or k == "w2"}, [p.grad.clone() for p in model.parameters()]
    (o1, g1), (o2, g2) = step(False), step(True)
    for k in o1: torch.testing.assert_close(o1[k], o2[k], rtol=1e-6, atol=1e-6)
    for a, b in zip(g1, g2): torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(HostReadError, match="numpy"):       # without the prepared plan, the step solves it
        with NoHostReads(), torch.no_grad(): obj(model, batch, 0)
    s = step_support(t)
    assert s["capture"] and not s["vmap"] and "exact OT plan" in s["why"] and "captured single" in s["why"]
    assert ContrastiveW2.host_stage and not make_objective("contrastive_vae").host_stage


def test_contrastive_ensemble_with_monitored_w2_equals_separate_runs(tb):
    members = [dict(objective="contrastive_w2_dirac", params=dict(dirac_weight=w), seed=s) for s, w in [(0, 1.0), (1, 3.0)]]
    res = fit_ensemble(run_specs(members, CMODEL, cfg(batch_size=8)), None, sampler=tb)
    for m, r in zip(members, res):
        alone = build_run(run_specs([m], CMODEL, cfg(batch_size=8))[0], tb()).fit()
        assert list(r["history"].columns) == list(alone.history.columns) and r["history"].columns[-1] == "w2"
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(alone.history.values), rtol=1e-4, atol=1e-4)


def test_vfae_group_mmd_is_vmapped_and_captured_and_equals_separate_runs():
    "VFAE's MMD over nuisance groups reads no group ids back (their count is the nuisance size): an ensemble like the others."
    from disentbook.data.colored_mnist import ColoredMNIST, PairSampler
    small = ColoredMNIST("train", "embedded")
    model = dict(kind="vae", image_size=28, channels=3, latent_dim=16, hidden=16)
    members = [dict(objective="vfae", params=dict(nuisance_sizes=[6.0, 3.0]), seed=s) for s in (0, 1)]
    sampler = lambda device: PairSampler(small, k=(1, 2), device=device)
    t = build_run(run_specs([members[0]], model, cfg(batch_size=8))[0], sampler("cpu"), data=small)
    s = step_support(t)
    assert s["vmap"] and s["capture"], s
    res = fit_ensemble(run_specs(members, model, cfg(batch_size=8)), small, sampler=sampler)
    for m, r in zip(members, res):
        alone = build_run(run_specs([m], model, cfg(batch_size=8))[0], sampler("cpu"), data=small).fit()
        torch.testing.assert_close(torch.tensor(r["history"].values), torch.tensor(alone.history.values), rtol=1e-4, atol=1e-4)


@cuda
def test_contrastive_w2_host_stage_is_captured_on_cuda(tb):
    "Eq. 8 on CUDA: the plan solved on the host before each replay; the step itself captured (no fallback), training like eager."
    config = cfg(steps=12, batch_size=8, device="cuda", amp=False)
    out = {}
    for capture in (False, True):
        t = build_run(run_specs([dict(objective="contrastive_w2", seed=3)], CMODEL, config)[0], tb("cuda"))
        out[capture] = CapturedStep(t, capture=capture, precision="fp32", strict=capture).fit()
    assert out[True].mode == "captured" and out[True].capture_error is None and out[False].mode == "eager"
    a, b = (torch.tensor(out[c].history()[["loss", "w2"]].values) for c in (False, True))
    assert torch.isfinite(b).all()
    # the noise of a captured step comes from the graph's RNG offsets, so the runs agree in distribution, not draw for draw
    torch.testing.assert_close(a, b, rtol=0.1, atol=0.5)
