"""Reference-based VAEs: golden values per loss term, gradient separation through the Trainer, shapes, bad input."""
import math

import pytest
import torch

from disentbook.core import InputError, make_generator
from disentbook.nets import VAE
from disentbook.objectives.base import make_objective
from disentbook.objectives.refvae import (RefDiscriminator, RefVAE, check_discriminator_loss, check_laplace_nll,
                                          check_latent_nll, decoder_sensitivity, discriminator_loss, laplace_nll,
                                          latent_log_ratio, latent_nll, latent_rec, rb_vae_terms, srb_vae_terms)
from disentbook.training.trainer import Trainer


class FixedSampler:
    "Batches of random images with keys x (unlabelled) and x_ref (reference)."
    device = "cpu"
    def sample(self, b, g):
        return dict(x=torch.rand(b, 3, 28, 28, generator=g), x_ref=torch.rand(b, 3, 28, 28, generator=g))


def small_model(): return RefVAE(28, 3, z_dim=4, e_dim=3, hidden=16)


def test_laplace_nll_golden():
    x, m = torch.ones(1, 1, 1, 2), torch.zeros(1, 1, 1, 2)
    assert laplace_nll(x, m, 1.0).item() == pytest.approx(2 * (1 + math.log(2)))
    assert laplace_nll(x, m, 0.5).item() == pytest.approx(2 * 2.0)              # log(2 * 0.5) = 0
    xx, mm = torch.rand(3, 2, 4, 4, dtype=torch.float64), torch.rand(3, 2, 4, 4, dtype=torch.float64)
    ref = -torch.distributions.Laplace(mm, 0.3).log_prob(xx).flatten(1).sum(1)
    torch.testing.assert_close(laplace_nll(xx, mm, 0.3), ref)
    with pytest.raises(InputError, match="b must be > 0"): laplace_nll(xx, mm, -1.0)
    with pytest.raises(InputError, match="same shape"): laplace_nll(xx, mm[:2], 1.0)


def test_latent_nll_golden():
    assert latent_nll(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2)).item() == pytest.approx(math.log(2 * math.pi))
    # one standard deviation away with variance e^2: 0.5 * (1 + 2 + log 2pi)
    v, mu, lv = torch.tensor([[math.e]]), torch.zeros(1, 1), torch.full((1, 1), 2.0)
    assert latent_nll(v, mu, lv).item() == pytest.approx(0.5 * (1 + 2 + math.log(2 * math.pi)))
    assert latent_rec(torch.ones(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), "l2").item() == pytest.approx(3.0)
    with pytest.raises(InputError, match="'nll' or 'l2'"): latent_rec(v, mu, lv, "cos")
    with pytest.raises(InputError, match="one shape"): latent_nll(v, mu, torch.zeros(2, 1))


def test_discriminator_loss_golden():
    assert discriminator_loss(torch.zeros(4), torch.zeros(2)).item() == pytest.approx(math.log(2))
    assert discriminator_loss(torch.full((2,), 50.0), torch.full((2,), -50.0)).item() == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(discriminator_loss(torch.full((2,), -500.0), torch.full((2,), 500.0)).item())


def test_checkers_accept_reference_and_reject_mistakes():
    assert check_laplace_nll(laplace_nll) and check_latent_nll(latent_nll) and check_discriminator_loss(discriminator_loss)
    assert not check_laplace_nll(lambda x, m, b: ((x - m) ** 2 / b).flatten(1).sum(1))
    assert not check_latent_nll(lambda v, mu, lv: 0.5 * ((v - mu) ** 2 * torch.exp(-lv)).sum(-1))
    assert not check_discriminator_loss(lambda q, p: torch.nn.functional.softplus(-q).mean() + torch.nn.functional.softplus(p).mean())


def test_rb_vae_terms_golden_and_shapes():
    torch.manual_seed(0)
    m = small_model()
    g = make_generator(0)
    xu, xr = torch.rand(5, 3, 28, 28, generator=g), torch.rand(5, 3, 28, 28, generator=g)
    t = rb_vae_terms(m, xu, xr, make_generator(1))
    assert t["z_u"].shape == (5, 4) and t["e_u"].shape == (5, 3) and t["z_r"].shape == (5, 4) and t["x_out"].shape == (10, 3, 28, 28)
    # Eq. 3 by hand from the samples: references decoded with e_r, Laplace b = 0.5, analytic KLs
    with torch.no_grad():
        rec_r = laplace_nll(xr, m.generate(t["z_r"]), 0.5).mean()
        rec_u = laplace_nll(xu, m.generate(t["z_u"], t["e_u"]), 0.5).mean()
        kl = lambda mu, lv: 0.5 * (mu ** 2 + lv.exp() - 1 - lv).sum(1)
        kz, ke = kl(t["mu_z"], t["logvar_z"]), kl(t["mu_e"][:5], t["logvar_e"][:5])
        want = 0.5 * (rec_u + kz[:5].mean() + ke.mean()) + 0.5 * (rec_r + kz[5:].mean())
    assert t["loss"].item() == pytest.approx(want.item(), rel=1e-4)
    with pytest.raises(InputError, match="image shapes"): rb_vae_terms(m, xu, xr[:, :1])


def test_reference_code_uses_learned_e_r():
    m = small_model()
    with torch.no_grad(): m.e_r.copy_(torch.tensor([1.0, -2.0, 0.5]))
    assert torch.equal(m.join(torch.zeros(2, 4))[:, 4:], torch.tensor([[1.0, -2.0, 0.5]] * 2))
    e = torch.randn(2, 3)
    assert torch.equal(m.join(torch.zeros(2, 4), e)[:, 4:], e)


def test_srb_terms_adversarial_golden_with_constant_discriminators():
    "With discriminators returning constants c0 (q) and c1 (p) the adversarial term is 1/2 (c0 - c1) per set."
    class Const(torch.nn.Module):
        def __init__(self, c_q, c_p): super().__init__(); self.c = (c_q, c_p)
        def forward(self, x, *lat):    # q-samples are real images of the batch: mark them by a flag pixel
            return torch.where(x[:, 0, 0, 0] == 2.0, torch.tensor(self.c[0]), torch.tensor(self.c[1]))
    m = small_model()
    xu, xr = torch.rand(4, 3, 28, 28), torch.rand(4, 3, 28, 28)
    xu[:, 0, 0, 0] = 2.0; xr[:, 0, 0, 0] = 2.0                      # flags (outside [0, 1] on purpose: never generated)
    t = srb_vae_terms(m, Const(3.0, 1.0), Const(-1.0, 0.5), xu, xr, ratio="learned")
    assert t["adv"].item() == pytest.approx(0.5 * (3.0 - 1.0) + 0.5 * (-1.0 - 0.5))
    assert [v.shape[1] for v in t["p0"][1:]] == [4, 3] and len(t["q1"]) == 2
    assert all(float(v.abs().max()) == 0 for v in t["a"].values())
    # the analytic split: T = a + D, so the constants add to the batch means of a
    torch.manual_seed(0); ta = srb_vae_terms(m, Const(3.0, 1.0), Const(-1.0, 0.5), xu, xr)
    a = {k: v.mean().item() for k, v in ta["a"].items()}
    assert ta["adv"].item() == pytest.approx(0.5 * (3.0 + a["q0"] - 1.0 - a["p0"]) + 0.5 * (-1.0 + a["q1"] - 0.5 - a["p1"]), rel=1e-5)
    with pytest.raises(InputError, match="ratio"): srb_vae_terms(m, Const(0, 0), Const(0, 0), xu, xr, ratio="exact")


def test_latent_log_ratio_golden():
    "log q(v|x) - log p(v): 0 when q is the prior; the difference of two Gaussian log densities otherwise."
    z = torch.randn(5, 3, dtype=torch.float64)
    assert latent_log_ratio((z,), (torch.zeros_like(z),), (torch.zeros_like(z),)).abs().max().item() == 0
    mu, lv, e, me, le = (torch.randn(5, k, dtype=torch.float64) for k in (3, 3, 2, 2, 2))
    N = torch.distributions.Normal
    ref = (N(mu, (0.5 * lv).exp()).log_prob(z).sum(1) - N(0.0, 1.0).log_prob(z).sum(1)
           + N(me, (0.5 * le).exp()).log_prob(e).sum(1) - N(0.0, 1.0).log_prob(e).sum(1))
    torch.testing.assert_close(latent_log_ratio((z, e), (mu, me), (lv, le)), ref)


def test_srb_vae_stays_bounded_at_lr_5e_4():
    """Regression: the literal estimator (D alone, `ratio='learned'`) drove the posterior log-variance to ~37 and
    rb_loss to ~1e17 at lr 5e-4; with the analytic latent part of the log ratio every term stays bounded."""
    from disentbook.data.digit_style import ReferenceSampler, make_digit_style
    ds = make_digit_style("embedded", size=28, n_reference=200, n_unlabelled=200, n_probe=40, seed=0)
    torch.manual_seed(0)
    m = RefVAE(28, 3, 4, 4, hidden=16)
    obj = make_objective("srb_vae", model=m, disc_hidden=16)
    assert obj.ratio == "analytic"
    tr = Trainer(m, obj, ReferenceSampler(ds.reference, ds.unlabelled, device="cpu"),
                 dict(steps=100, batch_size=12, lr=5e-4, betas=(0.5, 0.999), log_every=10, progress=False, device="cpu")).fit()
    h = tr.history
    assert h.drop(columns="step").abs().max().max() < 1e4
    assert h.logvar_max.max() < 10 and h.rb_loss.max() < 1e4 and h.adv.abs().max() < 1e3


def test_discriminator_shapes_and_bad_input():
    d = RefDiscriminator(3, 28, latent_dim=7, hidden=8)
    assert d(torch.rand(2, 3, 28, 28), torch.randn(2, 4), torch.randn(2, 3)).shape == (2,)
    with pytest.raises(InputError, match="7 latent"): d(torch.rand(2, 3, 28, 28), torch.randn(2, 4))
    with pytest.raises(InputError, match="images only"): RefDiscriminator(3, 28, 0, 8)(torch.rand(2, 3, 28, 28), torch.randn(2, 1))
    with pytest.raises(InputError): RefDiscriminator(3, 28, 2, 8, dropout=1.0)


def test_decoder_sensitivity():
    z = torch.randn(64, 2)
    assert decoder_sensitivity(lambda z, e: z.repeat(1, 2), z, 3, make_generator(0)) == 0.0
    s = decoder_sensitivity(lambda z, e: e, z, 1, make_generator(0))
    assert 0.8 < s < 1.5                                              # E|e1 - e2| = 2 / sqrt(pi) = 1.128


def _snapshot(mod): return {n: p.detach().clone() for n, p in mod.named_parameters()}


def _changed(before, mod): return {n for n, p in mod.named_parameters() if not torch.equal(before[n], p.detach())}


@pytest.mark.parametrize("name", ["srb_vae", "svae", "mathieu_ref"])
def test_gradient_separation_with_the_trainer(name):
    "The model's update never moves a discriminator; each discriminator's update moves only its own parameters."
    model = VAE(28, 3, 7, "laplace", 0.5, hidden=16) if name == "svae" else small_model()
    obj = make_objective(name, model=model, disc_hidden=16)
    tr = Trainer(model, obj, FixedSampler(), dict(steps=1, batch_size=4, log_every=1, progress=False, device="cpu", lr=1e-2))
    g = make_generator(0)
    batch = FixedSampler().sample(4, g)
    aux0, m0 = {k: _snapshot(n) for k, n in obj.aux_nets.items()}, _snapshot(model)
    out = tr.main_update(batch, 0)
    assert all(not _changed(aux0[k], n) for k, n in obj.aux_nets.items())       # model step: discriminators fixed
    assert _changed(m0, model)
    if name != "svae": assert "e_r" in _changed(m0, model) or name == "mathieu_ref"
    for k in obj.aux_nets:
        before_m, before = _snapshot(model), {j: _snapshot(n) for j, n in obj.aux_nets.items()}
        tr.aux_update(k, batch, out, 0)
        assert not _changed(before_m, model)                                      # discriminator step: model fixed
        assert _changed(before[k], obj.aux_nets[k])
        for j, n in obj.aux_nets.items():
            if j != k: assert not _changed(before[j], n)                         # ... and the other discriminator too


def test_objectives_registered_and_checked():
    m = small_model()
    assert make_objective("srb_vae", model=m).config["z_dim"] == 4
    with pytest.raises(InputError, match="'ref_vae' model"): make_objective("rb_vae", model=VAE(28, 3, 7))
    with pytest.raises(InputError, match="disc_dropout"): make_objective("srb_vae", disc_dropout=1.5)
    with pytest.raises(InputError, match="latent_rec"): make_objective("srb_vae", latent_rec="cos")
    with pytest.raises(InputError, match="x_ref"): make_objective("rb_vae")(m, dict(x=torch.rand(2, 3, 28, 28)), 0)
    with pytest.raises(InputError, match="bind"): make_objective("srb_vae")(m, FixedSampler().sample(2, make_generator(0)), 0)


def test_checkpoint_resume_rebuilds_model_and_discriminators(tmp_path):
    "The objective's config (with the sizes bind filled in) rebuilds it; training continues exactly."
    model = small_model()
    obj = make_objective("srb_vae", model=model, disc_hidden=8)
    cfg = dict(steps=2, batch_size=3, log_every=1, progress=False, device="cpu")
    Trainer(model, obj, FixedSampler(), cfg, out_dir=tmp_path).fit()
    tr = Trainer.resume(tmp_path / "checkpoint", FixedSampler(), steps=3)
    assert type(tr.model) is RefVAE and tr.step == 2 and set(tr.objective.aux_nets) == {"d0", "d1"}
    assert torch.equal(tr.model.e_r, model.e_r) and tr.objective.config == obj.config
    tr.fit()
    assert tr.step == 3
