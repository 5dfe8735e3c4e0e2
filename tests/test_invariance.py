"""Golden values for the invariance paper's terms: pair KL, JSD (bounds, symmetry, zero), top-k and swap on hand-made
latents, warm-up schedule, class means, SupCon, Ada aggregation, group accuracy, the objectives' steps."""
import math

import pytest
import torch

from disentbook.core import InputError, make_generator
from disentbook.eval.protocols import group_accuracy
from disentbook.objectives.base import make_objective
from disentbook.objectives import invariance as inv
from disentbook.objectives import invariance_baselines as invb
from disentbook.nets import VAE


def test_pair_kl_golden():
    z = torch.zeros(1)
    assert inv.pair_kl(z, z, torch.full((1,), 2.0), z).item() == pytest.approx(2.0)         # (Δμ)²/2
    assert inv.pair_kl(z, torch.log(torch.tensor([4.0])), z, z).item() == pytest.approx(0.5 * (4 - math.log(4) - 1))
    a, b = inv.pair_kl(z, z, z, torch.tensor([1.0])), inv.pair_kl(z, torch.tensor([1.0]), z, z)
    assert a.item() != pytest.approx(b.item())
    assert inv.pair_kl(z, z, z, torch.tensor([1.0]), symmetric=True).item() == pytest.approx(0.5 * (a + b).item())


def test_jsd_bounds_symmetry_zero():
    g = make_generator(0)
    m1, m2 = torch.randn(50, generator=g, dtype=torch.float64) * 3, torch.randn(50, generator=g, dtype=torch.float64) * 3
    v1, v2 = torch.randn(50, generator=g, dtype=torch.float64), torch.randn(50, generator=g, dtype=torch.float64)
    j = inv.jsd_gaussians(m1, v1, m2, v2)
    assert (j >= 0).all() and (j <= math.log(2)).all()
    assert torch.allclose(j, inv.jsd_gaussians(m2, v2, m1, v1), atol=1e-10)
    assert torch.allclose(inv.jsd_gaussians(m1, v1, m1, v1), torch.zeros(50, dtype=torch.float64), atol=1e-10)
    far = inv.jsd_gaussians(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                            torch.full((1,), 40.0, dtype=torch.float64), torch.zeros(1, dtype=torch.float64))
    assert far.item() == pytest.approx(math.log(2), abs=1e-9)
    # equal variances, means 2 sigma apart: the known value 0.3368 (numerical integration)
    two = inv.jsd_gaussians(*(torch.tensor([v], dtype=torch.float64) for v in (0.0, 0.0, 2.0, 0.0)))
    assert two.item() == pytest.approx(0.33679, abs=2e-4)
    assert inv.jsd_gaussians(torch.zeros(3, 4), torch.zeros(3, 4), torch.ones(3, 4), torch.zeros(3, 4)).shape == (3, 4)
    with pytest.raises(InputError, match="one shape"): inv.jsd_gaussians(torch.zeros(2), torch.zeros(2), torch.zeros(3), torch.zeros(3))


def test_top_k_and_swap_hand_made():
    div = torch.tensor([[0.1, 5.0, 0.2, 3.0], [9.0, 0.0, 0.0, 0.0]])
    assert inv.top_k_mask(div, torch.tensor([2, 1])).tolist() == [[False, True, False, True], [True, False, False, False]]
    zl, zm = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[-1.0, -2.0, -3.0]])
    m = inv.swap_mask(torch.tensor([[0.0, 7.0]]), 1, d_p=1)           # z_p = dim 0 swapped, z_n dim 2 changed
    assert m.tolist() == [[True, True, False]]
    a, b = inv.swap_latents(zl, zm, m)
    assert a.tolist() == [[-1.0, -2.0, 3.0]] and b.tolist() == [[1.0, 2.0, -3.0]]
    # warm-up by amount swaps the most similar shared latents first
    assert inv.swap_mask(torch.tensor([[0.3, 9.0, 0.1, 0.2]]), 1, n_swap=2).tolist() == [[False, False, True, True]]
    assert [int(inv.n_swap_schedule(t, 10, 1, 100)) for t in (0, 50, 100, 200)] == [1, 5, 9, 9]
    with pytest.raises(InputError, match="k: expected"): inv.top_k_mask(div, 5)


def test_class_means_and_supcon_golden():
    mu, y = torch.tensor([[0.0], [2.0], [4.0], [10.0]]), torch.tensor([0, 0, 0, 1])
    assert inv.class_means(mu, y, 2).flatten().tolist() == [2.0, 2.0, 2.0, 10.0]
    assert inv.supcon_loss(torch.ones(5, 3), torch.zeros(5, dtype=torch.long)).item() == pytest.approx(math.log(4))
    # two orthogonal classes, temperature 1: anchor's positive at cos 1, negatives at cos 0: -log(e / (e + 2))
    z = torch.tensor([[1.0, 0], [1.0, 0], [0, 1.0], [0, 1.0]])
    assert inv.supcon_loss(z, torch.tensor([0, 0, 1, 1]), 1.0).item() == pytest.approx(-math.log(math.e / (math.e + 2)))
    assert inv.supcon_loss(torch.randn(3, 2), torch.tensor([0, 1, 2])).item() == 0.0           # no positives at all
    with pytest.raises(InputError, match="temperature"): inv.supcon_loss(z, torch.tensor([0, 0, 1, 1]), 0.0)


def test_ada_aggregation_golden():
    m1, l1 = torch.tensor([[0.0, 1.0, 5.0]]), torch.log(torch.tensor([[1.0, 0.5, 1.0]]))
    m2, l2 = torch.tensor([[0.1, 1.0, -5.0]]), torch.log(torch.tensor([[1.0, 2.0, 1.0]]))
    a1, al1, a2, al2, sh = invb.ada_aggregate(m1, l1, m2, l2, "gvae")
    assert sh.tolist() == [[True, True, False]] and a1[0, 2].item() == 5.0 and a2[0, 2].item() == -5.0
    assert al1.exp()[0, 1].item() == pytest.approx(1.25) and a1[0, 0].item() == pytest.approx(0.05)
    b1, bl1, *_ = invb.ada_aggregate(m1, l1, m2, l2, "mlvae")
    assert bl1.exp()[0, 1].item() == pytest.approx(0.4) and b1[0, 1].item() == pytest.approx(1.0)


def test_group_accuracy_hand_made():
    y, p = [0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0]
    groups = [[0, 0], [0, 0], [1, 0], [1, 1], [1, 1], [0, 1]]
    r = group_accuracy(y, p, groups)
    assert r["average"] == pytest.approx(4 / 6) and r["worst"] == pytest.approx(0.5)
    assert r["per_group"][(0, 0)] == pytest.approx(0.5) and r["per_group"][(0, 1)] == 1.0


def _pair_batch(b=8, latent=20):
    from disentbook.data.colored_mnist import ColoredMNIST, PairSampler
    return PairSampler(ColoredMNIST("train", "embedded"), k=(1, 2)).sample(b, make_generator(0))


@pytest.mark.parametrize("name", ["swap_invariance", "ada_gvae", "ada_ml_vae", "inv_cnn", "inv_cnn_beta_vae", "vfae", "cvib", "cai", "uai"])
def test_objective_step_finite(name):
    torch.manual_seed(0)
    batch = _pair_batch()
    m = VAE(28, 3, 29 if name in ("vfae", "cvib") else 20, hidden=32)
    o = make_objective(name, model=m)
    out = o(m, batch, 0)
    assert torch.isfinite(out["loss"]) and out["loss"].requires_grad
    out["loss"].backward()
    for n in o.aux_nets: assert torch.isfinite(o.aux_loss(n, m, batch, {k: v.detach() if torch.is_tensor(v) else v for k, v in out.items()}, 0)["loss"])
    if hasattr(o, "classify"): assert o.classify(m, batch["x"]).shape == (8, 10)


def test_swap_objective_terms_and_bad_input():
    torch.manual_seed(0)
    batch, m = _pair_batch(), VAE(28, 3, 20, hidden=32)
    o = make_objective("swap_invariance", model=m, divergence="jsd", warmup_amount=10)
    out = o(m, batch, 0)
    assert out["n_swap"].item() == 1.0 and set(o.aux_nets) == {"classifier"}
    j = make_objective("swap_invariance", model=m, scheme="joint")
    assert "ce" in j(m, batch, 0) and not list(j.aux_nets)
    z = make_objective("swap_invariance", model=m, alpha=0.0, beta_sup=0.0, gamma_zp=0.0)
    oz = z(m, batch, 0)
    # the likelihood terms per input value (3 x 28 x 28 = 2352) by default, summed with reduction='sum'
    assert oz["loss"].item() == pytest.approx((oz["recon"] + oz["kl"]).item() / 2352, rel=1e-5)
    torch.manual_seed(1); os_ = make_objective("swap_invariance", model=m, alpha=0.0, beta_sup=0.0, gamma_zp=0.0, reduction="sum")(m, batch, 0)
    assert os_["loss"].item() == pytest.approx((os_["recon"] + os_["kl"]).item(), rel=1e-5)
    torch.manual_seed(2); w = make_objective("swap_invariance", model=m, alpha=0.0, gamma_zp=0.0)(m, batch, 0)
    assert w["loss"].item() == pytest.approx(((w["recon"] + w["kl"]) / 2352 + w["sup"]).item(), rel=1e-5)
    with pytest.raises(InputError, match="pair batches"): o(m, {"x": batch["x"]}, 0)
    with pytest.raises(InputError): make_objective("swap_invariance", divergence="l2")
    a = make_objective("annealed_vae", iteration_threshold=10)
    assert [a.capacity(t) for t in (0, 5, 20)] == [0.0, 12.5, 25.0]


def test_checkers_accept_reference_and_catch_mistakes():
    assert inv.check_pair_kl(inv.pair_kl) and inv.check_swap_topk(inv.swap_topk) and inv.check_supcon(inv.supcon_loss)
    assert not inv.check_pair_kl(lambda a, b, c, d: inv.pair_kl(c, d, a, b))
    assert not inv.check_supcon(lambda z, y, t: inv.supcon_loss(z, y, t, normalize=False))


def test_jsd_matches_adaptive_quadrature_for_unequal_variances():
    # golden values: scipy.integrate.quad of the JSD integrand over [-60, 60] (independent of the merged-grid rule)
    t = lambda *v: torch.tensor(v, dtype=torch.float64)
    j = inv.jsd_gaussians(t(0.3, 0.0, 0.0), t(-0.5, 2 * math.log(0.1), 0.0), t(1.1, 0.5, 2.0), t(0.4, 2 * math.log(3.0), 0.0))
    assert torch.allclose(j, t(0.1049199734, 0.5686410615, 0.3368308203), atol=1e-4)
    # batched per dimension: a (B, D) call equals D separate calls
    g = make_generator(1)
    a = [torch.randn(4, 3, generator=g, dtype=torch.float64) for _ in range(4)]
    cols = torch.stack([inv.jsd_gaussians(*(x[:, d] for x in a)) for d in range(3)], 1)
    assert torch.allclose(inv.jsd_gaussians(*a), cols, atol=1e-12)


def _history_40_steps(name: str):
    "The logged history of 40 short steps of objective `name` on Colored-MNIST pairs; every logged value finite."
    from disentbook.data.colored_mnist import ColoredMNIST, PairSampler
    from disentbook.training.config import TrainConfig
    from disentbook.training.trainer import Trainer
    torch.manual_seed(0)
    m = VAE(28, 3, 20, hidden=32)
    tr = Trainer(m, make_objective(name, model=m), PairSampler(ColoredMNIST("train", "embedded"), k=(1, 2)),
                 TrainConfig(steps=40, batch_size=16, lr=1e-3, log_every=5, progress=False, seed=0))
    h = tr.fit().history
    assert torch.isfinite(torch.tensor(h.drop(columns="step").values)).all(), name
    return h


def test_uai_adversary_stays_bounded():
    # the embeddings and disentanglers are tanh-bounded (the authors' code): each squared error per element <= 4, so the
    # adversarial term cannot run away (with raw encoder means it reached 1e16 within 300 steps)
    h = _history_40_steps("uai")
    assert h["disentangler"].max() <= 8.0 and h["ce"].iloc[-1] < 10


def test_cai_confusion_golden():
    # KL(uniform || D(h)) per nuisance factor, summed: 0 for a uniform discriminator, log(7/6) for probabilities (1, 2, 4)/7
    o = make_objective("cai", model=VAE(28, 3, 20, hidden=32))
    class Fixed(torch.nn.Module):
        def forward(self, h): return torch.tensor([[0.0] * 6 + [0.0, math.log(2), math.log(4)]]).expand(len(h), 9)
    o.aux_nets["disc"] = Fixed()
    assert abs(o.confusion(torch.zeros(5, 20)).item() - math.log(7 / 6)) < 1e-6
    o.aux_nets["disc"] = type("U", (torch.nn.Module,), {"forward": lambda self, h: torch.zeros(len(h), 9)})()
    assert abs(o.confusion(torch.zeros(5, 20)).item()) < 1e-6
    with pytest.raises(Exception, match="adversary"): make_objective("cai", model=VAE(28, 3, 20, hidden=32), adversary="minimax")


def test_cai_adversary_stays_bounded():
    # the encoder's term is KL(uniform || D(h)) >= 0 (minimised at a uniform discriminator), not the reversed CE, which is
    # unbounded below (the quick run's discriminator CE reached 31 with it)
    h = _history_40_steps("cai")
    assert h["adversarial"].min() >= -1e-5 and h["adversarial"].max() <= 2.0
    assert h["nuisance_ce"].max() <= 2 * (math.log(6) + math.log(3)) and h["ce"].max() < 5


def test_baselines_likelihood_per_pixel():
    # CNN + beta-VAE, VFAE, CVIB: class term at weight 1 + (likelihood terms) / (C H W) by default; 'sum' keeps the sums
    batch = _pair_batch()
    for red, s in (("pixel_mean", 1 / 2352), ("sum", 1.0)):
        m = VAE(28, 3, 20, hidden=32)
        o = make_objective("inv_cnn_beta_vae", model=m, reduction=red)(m, batch, 0)
        assert o["loss"].item() == pytest.approx((o["ce"] + s * (o["recon"] + 4 * o["kl"])).item(), rel=1e-5)
        m = VAE(28, 3, 29, hidden=32)
        torch.manual_seed(0); o = make_objective("cvib", model=m, reduction=red)(m, batch, 0)
        assert o["loss"].item() == pytest.approx((o["ce"] + s * (o["kl"] + o["recon"] + o["pairwise_kl"])).item(), rel=1e-5)
        torch.manual_seed(0); o = make_objective("vfae", model=m, reduction=red)(m, batch, 0)
        assert o["loss"].item() == pytest.approx((o["ce"] + o["mmd"] + s * (o["recon"] + o["kl"])).item(), rel=1e-5)
    with pytest.raises(Exception, match="reduction"): make_objective("vfae", model=m, reduction="mean")
