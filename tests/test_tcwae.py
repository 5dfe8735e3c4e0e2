"Golden-value tests of disentbook.tcwae: TC, ELBO surgery, MWS / MSS constants, density-ratio trick, IMQ MMD, objectives."
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.core import InputError, make_generator
from disentbook.nets import VAE
from disentbook.objectives.base import OBJECTIVES, make_objective
from disentbook.training.config import TrainConfig
from disentbook.training.trainer import Trainer
from disentbook.objectives.density_ratio import DensityRatio, density_ratio_loss, log_ratio
from disentbook.objectives.tcwae import (IMQ_SCALES, BetaTCVAE, FactorVAE, TCWAEGAN, TCWAEMWS, WAEMMD, check_imq_mmd, check_mws_log_qz, check_permute_dims, elbo_surgery_discrete, gaussian_log_density, gaussian_tc, imq_kernel, kl_decomposition, mmd_imq, mss_log_densities, mss_log_weights, mws_log_densities, mws_log_qz, pairwise_log_density, permute_dims, reconstruction_cost)

F64 = torch.float64


def rand(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=F64) * scale


# --- total correlation and ELBO surgery ---------------------------------------------------------------------------

@pytest.mark.parametrize("rho", [0.0, 0.3, 0.8, -0.95])
def test_gaussian_tc_2d(rho):
    cov = torch.tensor([[2.0, rho * math.sqrt(6)], [rho * math.sqrt(6), 3.0]], dtype=F64)
    assert gaussian_tc(cov).item() == pytest.approx(-0.5 * math.log(1 - rho ** 2), abs=1e-12)


def test_gaussian_tc_is_minus_half_logdet_correlation():
    g = make_generator(0)
    a = rand(g, 5, 5); cov = a @ a.T + torch.eye(5, dtype=F64)
    s = torch.diagonal(cov).sqrt()
    assert gaussian_tc(cov).item() == pytest.approx(-0.5 * torch.logdet(cov / s[:, None] / s[None]).item(), abs=1e-10)
    with pytest.raises(InputError, match="square"): gaussian_tc(torch.ones(3))


def test_elbo_surgery_identities():
    g = make_generator(1)
    q = torch.softmax(rand(g, 6, 12, scale=3.0), 1).view(6, 3, 4)
    prior = [torch.tensor([0.2, 0.3, 0.5], dtype=F64), torch.full((4,), 0.25, dtype=F64)]
    t = elbo_surgery_discrete(q, prior)
    assert t["avg_kl"].item() == pytest.approx((t["mi"] + t["marginal_kl"]).item(), abs=1e-12)
    assert t["marginal_kl"].item() == pytest.approx((t["tc"] + t["dwkl"]).item(), abs=1e-12)
    # one data point: no index-code MI; posterior = prior: nothing at all
    t1 = elbo_surgery_discrete(q[:1], prior)
    assert abs(t1["mi"].item()) < 1e-12
    pz = (prior[0][:, None] * prior[1][None]).expand(3, 3, 4)
    assert all(abs(v.item()) < 1e-12 for v in elbo_surgery_discrete(pz, prior).values())
    with pytest.raises(InputError, match="prior_marginals"): elbo_surgery_discrete(q, prior[:1])


# --- MWS and MSS: every constant ----------------------------------------------------------------------------------

def brute_force(z, mu, lv, N, kind):
    "Loops over i, j, d with the weights written out (MWS: 1/(N B); MSS: 1/N, (N-M)/(N M), 1/M with M = B - 1)."
    B, D = z.shape
    def dens(i, j, dims):
        return math.exp(sum(-0.5 * (math.log(2 * math.pi) + lv[j, d].item() + (z[i, d] - mu[j, d]).item() ** 2
                                    / math.exp(lv[j, d].item())) for d in dims))
    def w(i, j):
        if kind == "mws": return 1.0 / (N * B)
        M = B - 1
        return 1.0 / N if i == j else (N - M) / (N * M) if j == (i + 1) % B else 1.0 / M
    lq = [math.log(sum(w(i, j) * dens(i, j, range(D)) for j in range(B))) for i in range(B)]
    lm = [sum(math.log(sum(w(i, j) * dens(i, j, [d]) for j in range(B))) for d in range(D)) for i in range(B)]
    return torch.tensor(lq, dtype=F64), torch.tensor(lm, dtype=F64)


@pytest.mark.parametrize("kind,fn", [("mws", mws_log_densities), ("mss", mss_log_densities)])
@pytest.mark.parametrize("B,D,N", [(2, 1, 2), (4, 3, 10), (6, 2, 737_280)])
def test_estimators_against_brute_force(kind, fn, B, D, N):
    g = make_generator(B * 10 + D)
    z, mu, lv = rand(g, B, D), rand(g, B, D), rand(g, B, D, scale=0.5)
    for got, want in zip(fn(z, mu, lv, N), brute_force(z, mu, lv, N, kind)):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_mws_constant_is_log_n_times_batch():
    "Doubling N lowers log q by log 2 and the product of D marginals by D log 2: TC rises by (D - 1) log 2."
    g = make_generator(3)
    z, mu, lv = rand(g, 5, 4), rand(g, 5, 4), rand(g, 5, 4, scale=0.3)
    a, b = mws_log_densities(z, mu, lv, 100), mws_log_densities(z, mu, lv, 200)
    torch.testing.assert_close(a[0] - b[0], torch.full((5,), math.log(2), dtype=F64))
    torch.testing.assert_close(a[1] - b[1], torch.full((5,), 4 * math.log(2), dtype=F64))
    # the batch size enters as log B: a batch of B identical copies of one point gives log q(z|x) - log N
    z1, mu1, lv1 = z[:1].repeat(5, 1), mu[:1].repeat(5, 1), lv[:1].repeat(5, 1)
    lq, _ = mws_log_densities(z1, mu1, lv1, 100)
    torch.testing.assert_close(lq, gaussian_log_density(z1, mu1, lv1).sum(1) - math.log(100))
    # a check that fails if the constant is dropped
    assert not check_mws_log_qz(lambda z, m, l, n: torch.logsumexp(pairwise_log_density(z, m, l).sum(2), 1) - math.log(len(z)))


def test_mss_weights():
    for B, N in [(2, 2), (2, 10), (5, 5), (64, 737_280)]:
        w = mss_log_weights(B, N, F64).exp()
        torch.testing.assert_close(w.sum(1), torch.ones(B, dtype=F64))
        assert torch.allclose(torch.diagonal(w), torch.full((B,), 1.0 / N, dtype=F64))
        # the other points' weights sum to (N - 1)/N: unbiased for q(z) when they are uniform over the others
        torch.testing.assert_close(w.sum(1) - torch.diagonal(w), torch.full((B,), (N - 1) / N, dtype=F64))
    torch.testing.assert_close(mss_log_weights(3, 10, F64).exp(), torch.tensor(
        [[0.1, 0.4, 0.5], [0.5, 0.1, 0.4], [0.4, 0.5, 0.1]], dtype=F64))
    with pytest.raises(InputError, match="at least 2"): mss_log_weights(1, 10)
    with pytest.raises(InputError, match="smaller than the batch size"): mss_log_weights(8, 4)


def test_mss_unbiased_for_q_on_enumerable_set():
    """For z0 drawn from q(z|n0) and the other batch members uniform without replacement over the other points, the
    expectation of the MSS estimate of q(z0) (not its log) is the exact q(z0), whatever n0; MWS's is
    (q(z0|n0) + (B-1) * mean of the others) / (N B)."""
    from itertools import permutations
    g = make_generator(4)
    N, B = 5, 3
    mu, lv = rand(g, N, 2), torch.full((N, 2), -1.0, dtype=F64)
    z0 = rand(g, 1, 2)
    q_each = gaussian_log_density(z0, mu, lv).sum(1).exp()
    zb = torch.cat([z0, torch.zeros(B - 1, 2, dtype=F64)])
    for n0 in range(N):
        others = [n for n in range(N) if n != n0]
        mss, mws = [], []
        for rest in permutations(others, B - 1):
            idx = torch.tensor([n0, *rest])
            mss.append(mss_log_densities(zb, mu[idx], lv[idx], N)[0][0].exp().item())
            mws.append(mws_log_densities(zb, mu[idx], lv[idx], N)[0][0].exp().item())
        assert np.mean(mss) == pytest.approx(q_each.mean().item(), rel=1e-10)
        want = (q_each[n0] + (B - 1) * q_each[others].mean()).item() / (N * B)
        assert np.mean(mws) == pytest.approx(want, rel=1e-10)


def test_independent_dims_tc_up_to_constant():
    "Product-grid posteriors: MWS on the whole set = the exact per-sample TC + (D - 1) log N, exactly."
    g = make_generator(5)
    grid = torch.linspace(-2, 2, 6, dtype=F64)
    mu = torch.cartesian_prod(grid, grid, grid)
    lv = torch.full_like(mu, math.log(0.2))
    z = mu + math.sqrt(0.2) * rand(g, *mu.shape)
    N, D = len(mu), 3
    lp = pairwise_log_density(z, mu, lv)
    exact = (torch.logsumexp(lp.sum(2), 1) - (torch.logsumexp(lp, 1) - math.log(N)).sum(1) - math.log(N)).mean()
    tc = kl_decomposition(z, mu, lv, N)["tc"]
    assert tc.item() == pytest.approx(exact.item() + (D - 1) * math.log(N), abs=1e-9)
    assert abs(exact.item()) < 0.1


@pytest.mark.parametrize("estimator", ["mws", "mss"])
def test_decomposition_sums_to_sampled_kl(estimator):
    g = make_generator(6)
    z, mu, lv = rand(g, 7, 3), rand(g, 7, 3), rand(g, 7, 3, scale=0.5)
    t = kl_decomposition(z, mu, lv, 1000, estimator)
    sampled = (gaussian_log_density(z, mu, lv) - gaussian_log_density(z, 0.0, torch.zeros_like(z))).sum(1).mean()
    assert (t["mi"] + t["tc"] + t["dwkl"]).item() == pytest.approx(sampled.item(), abs=1e-10)


def test_estimator_input_errors():
    z = torch.zeros(4, 2)
    with pytest.raises(InputError, match="estimator"): kl_decomposition(z, z, z, 10, "iwae")
    with pytest.raises(InputError, match="dataset_size"): mws_log_densities(z, z, z, 0)
    with pytest.raises(InputError, match="dataset_size"): mws_log_densities(z, z, z, 2.5)
    with pytest.raises(InputError, match="Gaussian encoder"): mws_log_densities(z, z, None, 10)
    with pytest.raises(InputError, match="Gaussian encoder"): mws_log_densities(z, torch.zeros(4, 3), z, 10)


# --- density-ratio trick -------------------------------------------------------------------------------------------

def test_permute_dims_properties():
    z = torch.arange(60.0).view(15, 4)
    p = permute_dims(z, make_generator(0))
    for d in range(4): assert torch.equal(p[:, d].sort().values, z[:, d])
    assert torch.equal(p, permute_dims(z, make_generator(0)))
    big = torch.randn(5000, 1).repeat(1, 3)
    c = torch.corrcoef(permute_dims(big).T)
    assert (c - torch.eye(3)).abs().max() < 0.1
    with pytest.raises(InputError): permute_dims(torch.zeros(3))


def test_density_ratio_with_optimal_discriminator():
    "With the exact log ratio as the logit, Eq. 11 is the TC (MC over samples); the logistic loss is ln 2 at logit 0."
    g = make_generator(7)
    cov = torch.tensor([[1.0, 0.7], [0.7, 1.0]], dtype=F64)
    mvn = torch.distributions.MultivariateNormal(torch.zeros(2, dtype=F64), cov)
    z = mvn.sample((100_000,))
    exact = lambda t: mvn.log_prob(t) - gaussian_log_density(t, 0.0, torch.zeros_like(t)).sum(1)
    assert log_ratio(exact, z).mean().item() == pytest.approx(gaussian_tc(cov).item(), abs=0.02)
    zero = lambda t: torch.zeros(len(t))
    assert density_ratio_loss(zero, torch.zeros(10, 2), torch.zeros(10, 2)).item() == pytest.approx(math.log(2))
    with pytest.raises(InputError, match="expects 2 input features"): DensityRatio(2, 8, 1)(torch.zeros(4, 3))


def test_one_logit_equals_the_papers_two_logits():
    "The paper's 2-logit softmax CE (class 0 = q) with logits (a, b) is the 1-logit BCE with logit a - b (label 1 = q)."
    g = make_generator(3)
    a, b, a2, b2 = (rand(g, 50) for _ in range(4))
    two = 0.5 * (torch.nn.functional.cross_entropy(torch.stack([a, b], 1), torch.zeros(50, dtype=torch.long))
                 + torch.nn.functional.cross_entropy(torch.stack([a2, b2], 1), torch.ones(50, dtype=torch.long)))
    one = density_ratio_loss(lambda t: t, a - b, a2 - b2)
    assert one.item() == pytest.approx(two.item(), abs=1e-12)
    assert torch.allclose(log_ratio(lambda t: t, a - b), torch.log_softmax(torch.stack([a, b], 1), 1) @ torch.tensor([1.0, -1.0], dtype=F64))


# --- MMD ------------------------------------------------------------------------------------------------------------

def test_imq_golden():
    a, b = torch.zeros(1, 2, dtype=F64), torch.tensor([[1.0, 2.0]], dtype=F64)
    kab = sum(4 * s / (4 * s + 5.0) for s in IMQ_SCALES)
    assert imq_kernel(a, b).item() == pytest.approx(kab, abs=1e-12)
    assert imq_kernel(a, a).item() == pytest.approx(len(IMQ_SCALES), abs=1e-12)
    assert imq_kernel(a, b, prior_var=2.0).item() == pytest.approx(sum(8 * s / (8 * s + 5.0) for s in IMQ_SCALES), abs=1e-12)
    for unbiased in (True, False):
        assert mmd_imq(a.repeat(3, 1), b.repeat(5, 1), unbiased=unbiased).item() == pytest.approx(2 * (7 - kab), abs=1e-12)


def test_mmd_identical_samples():
    g = make_generator(8)
    x = rand(g, 10, 3)
    assert mmd_imq(x, x, unbiased=False).item() == 0.0
    K = imq_kernel(x, x); A = (K.sum() - torch.diagonal(K).sum()).item()
    assert mmd_imq(x, x).item() == pytest.approx(2 * A / (100 * 9) - 2 * 7 / 10, abs=1e-12)
    same = torch.ones(6, 3, dtype=F64)
    assert abs(mmd_imq(same, same).item()) < 1e-12          # a point mass against itself: 0 for both estimators


def test_mmd_unbiased_mean_zero_and_finite_grad():
    g = make_generator(9)
    u = [mmd_imq(torch.randn(16, 2, generator=g), torch.randn(16, 2, generator=g)).item() for _ in range(300)]
    v = [mmd_imq(torch.randn(16, 2, generator=g), torch.randn(16, 2, generator=g), unbiased=False).item() for _ in range(300)]
    assert abs(np.mean(u)) < 3 * np.std(u) / math.sqrt(300) + 1e-3 and np.mean(v) > 0.1
    x = torch.zeros(3, 2, requires_grad=True)
    mmd_imq(x, torch.zeros(3, 2)).backward()
    assert torch.isfinite(x.grad).all()
    with pytest.raises(InputError, match="at least 2"): mmd_imq(torch.zeros(1, 2), torch.zeros(4, 2))
    with pytest.raises(InputError): imq_kernel(torch.zeros(2, 2), torch.zeros(2, 3))


# --- objectives -----------------------------------------------------------------------------------------------------

def test_reconstruction_costs():
    x = torch.ones(2, 1, 4, 4)
    logits = torch.zeros(2, 1, 4, 4)                                        # x~ = 0.5 everywhere
    assert torch.allclose(reconstruction_cost(logits, x, "l2sq"), torch.full((2,), 16 * 0.25))
    assert torch.allclose(reconstruction_cost(logits, x, "l1"), torch.full((2,), 16 * 0.5))
    assert torch.allclose(reconstruction_cost(logits, x, "xent"), torch.full((2,), 16 * math.log(2)))
    with pytest.raises(InputError, match="cost"): reconstruction_cost(logits, x, "l3")


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return VAE(64, 1, latent_dim=4, likelihood="bernoulli")


@pytest.fixture(scope="module")
def xb():
    return (torch.rand(8, 1, 64, 64, generator=make_generator(1)) > 0.7).float()


def _run(obj, net, xb, seed=1):
    torch.manual_seed(seed)
    return obj(net, {"x": xb}, 0)


def test_eq9_tcwae_is_beta_tcvae_without_mi(net, xb):
    a = _run(TCWAEMWS(beta=7.0, gamma=3.0, cost="xent", dataset_size=500), net, xb)
    b = _run(BetaTCVAE(beta=7.0, alpha=0.0, gamma=3.0, dataset_size=500), net, xb)
    assert a["loss"].item() == pytest.approx(b["loss"].item(), rel=1e-5)
    c = _run(BetaTCVAE(beta=7.0, alpha=1.0, gamma=3.0, dataset_size=500), net, xb)
    assert c["loss"].item() == pytest.approx((b["loss"] + c["mi"]).item(), rel=1e-5)


@pytest.mark.parametrize("estimator", ["mws", "mss"])
def test_beta_tcvae_ones_is_vae_with_sampled_kl(net, xb, estimator):
    o = _run(BetaTCVAE(beta=1.0, alpha=1.0, gamma=1.0, dataset_size=500, estimator=estimator), net, xb)
    torch.manual_seed(1); out = net(xb)
    sampled = (gaussian_log_density(out["z"], out["mu"], out["logvar"])
               - gaussian_log_density(out["z"], 0.0, torch.zeros_like(out["z"]))).sum(1).mean()
    assert o["loss"].item() == pytest.approx((o["rec"] + sampled).item(), rel=1e-5)


def test_wae_mmd_terms(net, xb):
    o = _run(WAEMMD(lam=200.0, cost="l2sq"), net, xb)
    assert o["loss"].item() == pytest.approx((o["rec"] + 200.0 * o["mmd"]).item(), rel=1e-5)
    # a deterministic encoder is allowed
    det = VAE(64, 1, latent_dim=4, encoder="deterministic")
    assert torch.isfinite(WAEMMD(lam=10.0)(det, {"x": xb}, 0)["loss"])
    with pytest.raises(InputError, match="Gaussian encoder"): TCWAEMWS(dataset_size=100)(det, {"x": xb}, 0)
    with pytest.raises(InputError, match="needs dataset_size"): TCWAEMWS()(det, {"x": xb}, 0)


def test_registry_and_configs():
    for name in ("beta_tcvae", "factor_vae", "wae_mmd", "tcwae_mws", "tcwae_gan"): assert name in OBJECTIVES
    objs = [BetaTCVAE(beta=8.0, estimator="mss"), BetaTCVAE(beta=8.0, dataset_size=100), FactorVAE(gamma=100.0, latent_dim=4, disc_hidden=8, disc_depth=1),
            WAEMMD(lam=200.0, cost="l1"), TCWAEMWS(beta=50.0, gamma=100.0),
            TCWAEGAN(beta=100.0, gamma=5.0, cost="l2sq", latent_dim=4, disc_hidden=8, disc_depth=1)]
    for o in objs: assert make_objective(**o.config).config == o.config
    for bad in (lambda: BetaTCVAE(beta=-1.0), lambda: TCWAEMWS(gamma=float("nan")), lambda: FactorVAE(gamma=True),
                lambda: WAEMMD(cost="l3"), lambda: TCWAEMWS(dataset_size=0), lambda: BetaTCVAE(estimator="x")):
        with pytest.raises(InputError): bad()


def test_discriminator_settings_and_table3():
    f = FactorVAE(gamma=100.0, latent_dim=10)
    assert f.aux_optim["disc"] == dict(lr=1e-4, betas=(0.5, 0.9), eps=1e-8)
    assert isinstance(f.aux_nets["disc"], DensityRatio)
    lin = [m for m in f.aux_nets["disc"].modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in lin] == [(10, 1000)] + [(1000, 1000)] * 5 + [(1000, 1)]
    assert not any(isinstance(m, torch.nn.LeakyReLU) for m in f.aux_nets["disc"].modules())     # ReLU (Table 3)
    t = TCWAEGAN(beta=1.0, gamma=1.0, disc_lr=1e-5, latent_dim=10)
    assert sorted(t.aux_nets) == ["dimwise", "tc"] and t.aux_optim["tc"]["lr"] == 1e-5


class _Fixed:
    device = torch.device("cpu")
    def __init__(self, x): self.x = x
    def sample(self, batch_size, generator): return {"x": self.x}


@pytest.mark.parametrize("make", [lambda: FactorVAE(gamma=10.0, latent_dim=4, disc_hidden=32, disc_depth=2, disc_lr=1e-3),
                                  lambda: TCWAEGAN(beta=10.0, gamma=5.0, latent_dim=4, disc_hidden=32, disc_depth=2, disc_lr=1e-3)])
def test_no_gradient_leak_and_opposition(make, xb):
    torch.manual_seed(0)
    obj = make()
    tr = Trainer(VAE(64, 1, 4), obj, _Fixed(xb), TrainConfig(steps=1, batch_size=8, lr=1e-3, device="cpu", progress=False))
    held = lambda opt: {id(p) for g in opt.param_groups for p in g["params"]}
    disc_ids = {id(p) for p in obj.aux_nets.parameters()}
    assert not held(tr.optimizer) & disc_ids
    for name, opt in tr.aux_optimizers.items():
        assert held(opt) == {id(p) for p in obj.aux_nets[name].parameters()} and opt.defaults["betas"] == (0.5, 0.9)
    snap = lambda mod: [p.detach().clone() for p in mod.parameters()]
    d0, m0 = snap(obj.aux_nets), snap(tr.model)
    out = tr.main_update({"x": xb}, 0)
    assert all(torch.equal(a, b) for a, b in zip(d0, obj.aux_nets.parameters()))
    assert all(p.grad is None for p in obj.aux_nets.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(m0, tr.model.parameters()))
    m1 = snap(tr.model)
    for name in tr.aux_optimizers: tr.aux_update(name, {"x": xb}, out, 0)
    assert all(torch.equal(a, b) for a, b in zip(m1, tr.model.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(d0, obj.aux_nets.parameters()))
    # opposition: training the TC discriminator lowers its loss and raises the TC estimate the encoder minimises
    name = "disc" if "disc" in obj.aux_nets else "tc"
    d = obj.aux_nets[name]
    zc = torch.randn(256, 1) @ torch.ones(1, 4) + 0.3 * torch.randn(256, 4)
    def state():
        with torch.no_grad():
            torch.manual_seed(3); fake = permute_dims(zc)
            return density_ratio_loss(d, zc, fake).item(), log_ratio(d, zc).mean().item()
    before = state()
    for _ in range(30): tr.aux_update(name, {"x": xb}, {"_z": zc}, 0)
    after = state()
    assert after[0] < before[0] and after[1] > before[1]
    # ... and a step of the encoder side (gradient of the estimate w.r.t. z, discriminator frozen) lowers it
    z = zc.clone().requires_grad_()
    for p in d.parameters(): p.requires_grad_(False)
    log_ratio(d, z).mean().backward()
    with torch.no_grad(): lowered = log_ratio(d, zc - 0.05 * z.grad / z.grad.norm(dim=1, keepdim=True).clamp_min(1e-12)).mean().item()
    assert lowered < after[1]


@pytest.mark.parametrize("name,kw", [("beta_tcvae", dict(beta=8.0, dataset_size=1000)),
                                     ("factor_vae", dict(gamma=100.0, disc_hidden=32, disc_depth=2)),
                                     ("wae_mmd", dict(lam=200.0)),
                                     ("tcwae_mws", dict(beta=50.0, gamma=100.0, dataset_size=1000)),
                                     ("tcwae_gan", dict(beta=100.0, gamma=5.0, disc_hidden=32, disc_depth=2))])
def test_trains_with_trainer(name, kw, xb):
    torch.manual_seed(0)
    m = VAE(64, 1, 10)
    tr = Trainer(m, make_objective(name, model=m, **kw), _Fixed(xb),
                 TrainConfig(steps=2, batch_size=8, lr=4e-4, eps=8e-4, log_every=1, device="cpu", progress=False))
    h = tr.fit().history
    assert len(h) == 2 and np.isfinite(h.drop(columns="step").to_numpy()).all()
    assert "rec" in h.columns


# --- checkers -------------------------------------------------------------------------------------------------------

def test_checkers_accept_references_and_catch_bugs():
    assert check_mws_log_qz(mws_log_qz) and check_imq_mmd(mmd_imq) and check_permute_dims(permute_dims)
    naive = lambda z, m, l, n: pairwise_log_density(z, m, l).sum(2).exp().sum(1).log() - math.log(n * len(z))
    assert not check_mws_log_qz(naive)
    only_n = lambda z, m, l, n: torch.logsumexp(pairwise_log_density(z, m, l).sum(2), 1) - math.log(n)
    assert not check_mws_log_qz(only_n)
    assert not check_permute_dims(lambda z, g: z[torch.randperm(len(z), generator=g)])
    assert not check_permute_dims(lambda z, g: z.clone())
    assert not check_permute_dims(lambda z, g: permute_dims(z.detach(), g))
    assert not check_imq_mmd(lambda x, y: mmd_imq(x, y, unbiased=False))
    assert not check_imq_mmd(lambda x, y: mmd_imq(x, y, scales=(1.0,)))
    r = check_mws_log_qz(lambda *a: (_ for _ in ()).throw(NotImplementedError()))
    assert not r and "not implemented" in r.message


def test_exercise_notebook_student_edition(tmp_path):
    "The instructor notebook has three solutions and three instructor cells; the student edition keeps neither."
    import json
    from disentbook.classroom.exercises import student_edition
    src = Path(__file__).resolve().parents[1] / "nbs" / "exercises" / "03_tcwae_exercises.ipynb"
    r = student_edition(src, tmp_path / "student.ipynb")
    assert r["solutions"] == 3 and r["instructor_cells_removed"] == 3
    text = "".join("".join(c["source"]) for c in json.loads((tmp_path / "student.ipynb").read_text())["cells"])
    assert "### BEGIN SOLUTION" not in text and "logsumexp(lp.sum(2)" not in text
    for name in ("check_mws_log_qz", "check_permute_dims", "check_imq_mmd"): assert name in text


# --- does the adversarial TCWAE match its prior? ------------------------------------------------------------------

def test_tcwae_gan_samples_and_sign():
    "Each discriminator sees the samples of the derivation; the encoder minimises + beta·TC logit + gamma·dimwise logit."
    obj = TCWAEGAN(beta=2.0, gamma=5.0, latent_dim=4, disc_hidden=16, disc_depth=2)
    zc = torch.randn(32, 1, generator=make_generator(0)) @ torch.ones(1, 4) + 0.3 * torch.randn(32, 4, generator=make_generator(1))
    def seeded(f, seed=3):
        torch.manual_seed(seed); return f()
    got = seeded(lambda: obj.aux_loss("tc", None, None, {"_z": zc}, 0))["loss"]
    assert torch.equal(got, seeded(lambda: density_ratio_loss(obj.aux_nets["tc"], zc, permute_dims(zc))))
    def dimwise_ref():
        zp = permute_dims(zc); return density_ratio_loss(obj.aux_nets["dimwise"], zp, torch.randn_like(zc))
    assert torch.equal(seeded(lambda: obj.aux_loss("dimwise", None, None, {"_z": zc}, 0))["loss"], seeded(dimwise_ref))
    zg = zc.clone().requires_grad_(True)
    r, _ = seeded(lambda: obj.regularizer(None, None, {"z": zg}, None, 0), 4)
    ref = seeded(lambda: 2.0 * log_ratio(obj.aux_nets["tc"], zg).mean()
                 + 5.0 * log_ratio(obj.aux_nets["dimwise"], permute_dims(zg)).mean(), 4)
    assert r.item() == pytest.approx(ref.item(), abs=1e-6)
    assert torch.autograd.grad(r, zg)[0].abs().sum() > 0


class _AffineCodes(torch.nn.Module):
    "Ten Gaussian codes, an affine function of four binary pixels, started far from N(0, I); a linear decoder."
    config = {"kind": "affine_codes"}
    def __init__(self, D=10):
        super().__init__(); g = make_generator(0)
        self.W, self.b = torch.nn.Parameter(torch.randn(D, 4, generator=g)), torch.nn.Parameter(2 + torch.randn(D, generator=g))
        self.lv, self.dec = torch.nn.Parameter(torch.full((D,), -4.0)), torch.nn.Linear(D, 4)
    def forward(self, x):
        mu = x.flatten(1) @ self.W.T + self.b; lv = self.lv.expand_as(mu)
        z = mu + (0.5 * lv).exp() * torch.randn_like(mu)
        return dict(mu=mu, logvar=lv, z=z, x_out=self.dec(z).view_as(x))


class _Bits:
    device = torch.device("cpu")
    def sample(self, n, generator): return {"x": (torch.rand(n, 1, 2, 2, generator=generator) > 0.5).float()}


class _FlippedTCWAEGAN(TCWAEGAN):
    def regularizer(self, *args):
        r, t = super().regularizer(*args); return -r, t


@pytest.mark.parametrize("cls,closer", [(TCWAEGAN, True), (_FlippedTCWAEGAN, False)])
def test_tcwae_gan_pulls_codes_to_the_prior(cls, closer):
    "With the trainer: the γ term pulls the codes to N(0, I) (MMD more than halved in 600 steps); its flipped sign pushes them away."
    torch.manual_seed(0)
    m = _AffineCodes()
    obj = cls(beta=1.0, gamma=5.0, cost="l2sq", latent_dim=10, disc_hidden=128, disc_depth=2)
    tr = Trainer(m, obj, _Bits(), TrainConfig(steps=600, batch_size=64, lr=4e-4, eps=8e-4, log_every=50, progress=False,
                                              device="cpu", precision="fp32"))
    def mmd():
        with torch.no_grad(): z = m(_Bits().sample(2000, make_generator(1))["x"])["z"]
        return mmd_imq(z, torch.randn(2000, 10, generator=make_generator(2))).item()
    before = mmd(); tr.fit(); after = mmd()
    assert (after < 0.5 * before) if closer else (after > before)
