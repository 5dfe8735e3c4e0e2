"Golden-value tests of disentbook.contrastive: Lemma 2, the Dirac surrogate, the exact OT loss, objectives, discriminators, checkers."
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from disentbook.objectives.density_ratio import DensityRatio, density_ratio_loss
from disentbook.objectives.contrastive import (ContrastiveVAE, check_dirac_surrogate, check_lemma2_w2, check_ot_danskin_grad, contrastive_terms, dirac_surrogate, ot_plan, permute_pairs, sq_cost_matrix, symmetric_kl_adversarial, w2_gaussian_dirac, w2_loss)
from disentbook.core import InputError, make_generator
from disentbook.data.base import LabelledImages
from disentbook.data.samplers import TargetBackgroundSampler
from disentbook.nets import build_model
from disentbook.eval.protocols import w2_empirical, w2_gaussian
from disentbook.training.trainer import Trainer
from disentbook.objectives.base import make_objective

SMALL = dict(z_dim=3, s_dim=2)


def _pts(n, d, seed, dtype=torch.float64):
    return torch.randn(n, d, generator=make_generator(seed), dtype=dtype)


def test_lemma2_closed_form_and_gaussian_limit():
    mu, sd = torch.tensor([3.0, 4.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    assert w2_gaussian_dirac(mu, (2 * sd.log())).item() == pytest.approx(25 + 1 + 4)
    w = w2_gaussian(mu.numpy(), np.diag(sd.numpy() ** 2), np.zeros(3), 1e-10 * np.eye(3))
    assert w == pytest.approx(30.0, abs=1e-4)


def test_dirac_surrogate_zero_only_at_dirac_and_batch_mean():
    assert dirac_surrogate(torch.zeros(4, 3), torch.full((4, 3), -float("inf"))).item() == 0.0
    assert dirac_surrogate(torch.zeros(2, 8), torch.zeros(2, 8)).item() == 8.0
    mu = torch.tensor([[1.0, 0.0], [0.0, 3.0]]); lv = torch.tensor([[0.0, math.log(2.0)], [math.log(4.0), 0.0]])
    assert dirac_surrogate(mu, lv).item() == pytest.approx(((1 + 1 + 2) + (9 + 4 + 1)) / 2)
    with pytest.raises(InputError, match="equal shapes"): dirac_surrogate(torch.zeros(2, 3), torch.zeros(3, 2))


def test_w2_loss_golden_values():
    a = _pts(50, 4, 0)
    t = torch.tensor([1.0, -1.0, 2.0, 0.5], dtype=torch.float64)
    assert w2_loss(a, a[torch.randperm(50)]).item() == pytest.approx(0.0, abs=1e-12)
    assert w2_loss(a, a + t).item() == pytest.approx((t ** 2).sum().item(), abs=1e-9)
    for solver in ("emd", "hungarian"):
        loss, plan = w2_loss(a, _pts(50, 4, 1) * 2, solver, return_plan=True)
        p = plan.numpy() * 50
        assert np.allclose(np.sort(p, 1)[:, -1], 1.0) and np.allclose(p.sum(0), 1) and np.allclose(p.sum(1), 1)
        assert ((p > 1e-12).sum(1) == 1).all()                            # a permutation matrix / B
    assert w2_loss(a, _pts(50, 4, 1), "emd").item() == pytest.approx(w2_loss(a, _pts(50, 4, 1), "hungarian").item(), abs=1e-9)


def test_w2_loss_agrees_with_protocols():
    a, b = _pts(40, 6, 2), _pts(30, 6, 3) + 0.7
    assert w2_loss(a, b).item() == pytest.approx(w2_empirical(a.numpy(), b.numpy()), abs=1e-9)
    a32, b32 = a[:30].float(), b.float()
    assert w2_loss(a32, b32, "hungarian").item() == pytest.approx(w2_empirical(a32.numpy(), b32.numpy()), rel=1e-5)


def test_w2_loss_danskin_gradient_matches_finite_differences():
    a, b = _pts(8, 3, 4).requires_grad_(True), _pts(8, 3, 5)
    w2_loss(a, b).backward()
    h, fd = 1e-6, torch.zeros_like(a)
    with torch.no_grad():
        for i in range(8):
            for j in range(3):
                e = torch.zeros_like(a); e[i, j] = h
                fd[i, j] = (w2_loss(a + e, b) - w2_loss(a - e, b)) / (2 * h)
    assert torch.allclose(a.grad, fd, atol=1e-6)


def test_ot_bad_inputs():
    with pytest.raises(InputError, match="equal batch sizes"): w2_loss(_pts(4, 2, 0), _pts(3, 2, 1), "hungarian")
    with pytest.raises(InputError, match="solver"): ot_plan(torch.zeros(2, 2), "sinkhorn")
    with pytest.raises(InputError, match="NaN"): ot_plan(torch.tensor([[0.0, float("nan")], [1.0, 0.0]]))
    with pytest.raises(InputError, match=r"\(n, d\) and \(m, d\)"): sq_cost_matrix(torch.zeros(3, 2), torch.zeros(3, 4))


def test_model_contract_and_rebuild():
    m = ContrastiveVAE(hidden=32, **SMALL)
    m2 = build_model(m.config); m2.load_state_dict(m.state_dict())
    x = (torch.rand(3, 1, 28, 28) * 255).to(torch.uint8)
    assert torch.equal(m.embed(x), m2.embed(x)) and m.embed(x).shape == (3, 5)
    z, s = m.split(m.embed(x)); assert z.shape == (3, 3) and s.shape == (3, 2)
    assert torch.equal(m.join(z)[:, 3:], torch.zeros(3, 2))
    with pytest.raises(InputError, match=r"\(N, 1, 28, 28\)"): m(torch.rand(2, 1, 64, 64))
    with pytest.raises(InputError, match="s_dim"): ContrastiveVAE(s_dim=0)


def _sampler(n=32):
    g = make_generator(0)
    tx = (torch.rand(n, 1, 28, 28, generator=g) * 255).to(torch.uint8)
    return TargetBackgroundSampler(LabelledImages(tx, torch.arange(n) % 10, [str(i) for i in range(10)], "t"),
                                   LabelledImages(tx // 2, torch.zeros(n, dtype=torch.long), ["b"], "b"), device="cpu")


def test_lvae_ignores_q_s_given_y_and_eq7_does_not():
    m = ContrastiveVAE(hidden=32, **SMALL); b = _sampler().sample(6, make_generator(1))
    t = contrastive_terms(m, b["x"], b["y"])
    g = torch.autograd.grad(t["l_vae"], [t["mu_s_y"]], allow_unused=True, retain_graph=True)[0]
    assert g is None or g.abs().max() == 0
    g7 = torch.autograd.grad(t["l_vae"] + dirac_surrogate(t["mu_s_y"], t["logvar_s_y"]), [t["mu_s_y"]])[0]
    assert torch.allclose(g7, 2 * t["mu_s_y"] / 6)


@pytest.mark.parametrize("name,kw", [("contrastive_vae", {}), ("contrastive_w2_dirac", dict(dirac_weight=3.0)),
                                     ("contrastive_w2", dict(lambda_z=2.0)), ("cvae", dict(disc_hidden=8, **SMALL)),
                                     ("srb_vae_contrastive", dict(disc_hidden=8, image_numel=784, **SMALL))])
def test_objective_loss_is_its_formula(name, kw):
    m = ContrastiveVAE(hidden=32, **SMALL); obj = make_objective(name, **kw); b = _sampler().sample(6, make_generator(2))
    o = obj(m, b, 0)
    extra = {"contrastive_vae": 0.0, "contrastive_w2_dirac": 3.0 * o["dirac"], "contrastive_w2": o["dirac"] + 2.0 * o.get("w2", float("nan")),
             "cvae": o.get("tc"), "srb_vae_contrastive": o.get("kl_pq", 0) + o.get("latent_rec", 0)}[name]
    assert o["loss"].item() == pytest.approx((o["l_vae"] + extra).item(), rel=1e-5)
    assert make_objective(**obj.config).config == obj.config
    # the exact W2 is a step term of Eq. 8 only; the others log it as a monitor, outside the step (no host read in it)
    assert ("w2" in o) == (name == "contrastive_w2") and obj.monitor_keys() == ([] if name == "contrastive_w2" else ["w2"])


def test_density_ratio_estimates_known_kl():
    torch.manual_seed(0)
    d = DensityRatio(1, hidden=32, depth=2); opt = torch.optim.Adam(d.parameters(), lr=3e-3)
    for _ in range(300):
        opt.zero_grad(); density_ratio_loss(d, (torch.randn(256, 1),), (torch.randn(256, 1) + 1.0,)).backward(); opt.step()
    with torch.no_grad(): est = symmetric_kl_adversarial(d, (torch.randn(20000, 1),), (torch.randn(20000, 1) + 1.0,))
    # KL(N(0,1) || N(1,1)) = KL(N(1,1) || N(0,1)) = 1/2
    assert est["kl_qp"].item() == pytest.approx(0.5, abs=0.1) and est["kl_pq"].item() == pytest.approx(0.5, abs=0.1)
    assert est["symmetric"].item() == pytest.approx(est["kl_qp"].item() + est["kl_pq"].item())


def test_needs_are_bound_from_the_model():
    m = ContrastiveVAE(hidden=16, **SMALL)
    with pytest.raises(InputError, match="needs latent_split"): make_objective("cvae")(m, _sampler().sample(6, make_generator(0)), 0)
    srb = make_objective("srb_vae_contrastive", model=m, disc_hidden=8)
    assert {k: srb.hparams[k] for k in ("z_dim", "s_dim", "image_numel")} == dict(z_dim=3, s_dim=2, image_numel=784)
    assert srb.aux_nets["d_target"].in_features == 784 + 5 and srb.aux_nets["d_background"].in_features == 784 + 3
    with pytest.raises(InputError, match="built with z_dim=4, but the model has z_dim=3"): make_objective("cvae", z_dim=4, s_dim=2, model=m)


def test_permute_pairs_keeps_marginals():
    z, s = torch.arange(10.0)[:, None], torch.arange(10.0)[:, None] * 2
    z2, s2 = permute_pairs(z, s, make_generator(0))
    assert torch.equal(z2, z) and torch.equal(s2.sort(0).values, s) and not torch.equal(s2, s)


@pytest.mark.parametrize("name", ["cvae", "srb_vae_contrastive"])
def test_discriminators_oppose_the_encoder_and_nothing_leaks(name):
    m = ContrastiveVAE(hidden=16, **SMALL)
    obj = make_objective(name, model=m, disc_hidden=8)
    tr = Trainer(m, obj, _sampler(), dict(steps=1, batch_size=6, lr=1e-3, device="cpu", progress=False))
    b = tr.sampler.sample(6, tr.generator)
    out = tr.main_update(b, 0)
    assert all(p.grad is None for p in obj.aux_nets.parameters()), "main update leaked into the discriminators"
    assert all(not p.requires_grad for p in obj.aux_nets.parameters())
    before = [p.detach().clone() for p in tr.model.parameters()]
    for k in tr.aux_optimizers: tr.aux_update(k, b, out, 0)
    assert all(torch.equal(a, p) for a, p in zip(before, tr.model.parameters())), "aux update changed the model"
    # opposition: on the samples the model produced, d(main)/d(logit) and d(disc loss)/d(logit) have opposite signs
    key, disc_name, label = ("_z", "tc", 1.0) if name == "cvae" else ("_p_t", "d_target", 0.0)
    disc = obj.aux_nets[disc_name]
    inp = (out["_z"], out["_s"]) if name == "cvae" else tuple(v.detach() for v in out["_p_t"])
    logit = disc(*inp).detach().requires_grad_(True)
    sign = 1.0 if name == "cvae" else -1.0                                # main: +E[T] (cVAE), -E_p[T] (sRb)
    g_main, = torch.autograd.grad(sign * logit.mean(), logit)
    g_disc, = torch.autograd.grad(F.binary_cross_entropy_with_logits(logit, torch.full_like(logit, label)), logit)
    assert (g_main * g_disc < 0).all()


def test_w2_objective_gradient_reaches_the_z_encoder_only_through_z():
    m = ContrastiveVAE(hidden=16, **SMALL); b = _sampler().sample(6, make_generator(3))
    o1 = make_objective("contrastive_w2", lambda_z=1.0)
    torch.manual_seed(0); l0 = make_objective("contrastive_w2_dirac")(m, b, 0)["loss"]
    torch.manual_seed(0); out1 = o1(m, b, 0)
    assert out1["loss"].item() == pytest.approx((l0 + out1["w2"]).item(), rel=1e-5)
    g = torch.autograd.grad(out1["w2"], list(m.s_encoder.parameters()) + list(m.decoder.parameters()), allow_unused=True)
    assert all(x is None or x.abs().max() == 0 for x in g)


def test_checkers_accept_references_and_reject_mistakes():
    assert check_lemma2_w2(lambda mu, sd: mu.pow(2).sum(-1) + sd.pow(2).sum(-1))
    assert check_dirac_surrogate(dirac_surrogate) and check_ot_danskin_grad(w2_loss)
    assert not check_lemma2_w2(lambda mu, sd: mu.pow(2).sum(-1) + sd.sum(-1))
    assert not check_dirac_surrogate(lambda m, lv: (m.pow(2) + lv.exp()).sum())
    assert not check_ot_danskin_grad(lambda a, b: sq_cost_matrix(a, b).diagonal().mean())
    r = check_ot_danskin_grad(lambda a, b: (ot_plan(sq_cost_matrix(a, b)) * sq_cost_matrix(a, b)).sum().detach())
    assert not r and "no gradient" in r.message
