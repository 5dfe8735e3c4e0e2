"""Five numbers checked against independent computations (issue 24.4): the JSD of two Gaussians against adaptive
quadrature, VFAE's MMD penalty against a brute-force sum over pairs of nuisance groups, the unbiasedness of the MMD
U-statistic by simulation, explicitness against disentanglement_lib's computation written with scikit-learn, and
the exact aggregate posterior against the mixture density summed directly."""
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from disentbook.core import InputError, make_generator
from disentbook.objectives import invariance as inv
from disentbook.objectives import invariance_baselines as invb
from disentbook.objectives.tcwae import exact_log_densities, gaussian_log_density
from disentbook.eval.metrics import explicitness, toy_representation


# --- 1. JSD of two univariate Gaussians --------------------------------------------------------------------------

def jsd_quad(ml, vl, mm, vm):
    "0.5 KL(p || M) + 0.5 KL(q || M) by scipy's adaptive quadrature, piecewise around both means."
    sl, sm = math.exp(0.5 * vl), math.exp(0.5 * vm)
    def F(z):
        a, b = stats.norm.logpdf(z, ml, sl), stats.norm.logpdf(z, mm, sm)
        lm = np.logaddexp(a, b) - math.log(2)
        return 0.5 * (math.exp(a) * (a - lm) + math.exp(b) * (b - lm))
    pts = sorted([ml - 12 * sl, ml, ml + 12 * sl, mm - 12 * sm, mm, mm + 12 * sm])
    return sum(integrate.quad(F, p, q, epsabs=1e-14, epsrel=1e-12, limit=200)[0] for p, q in zip(pts[:-1], pts[1:]))


def test_jsd_gaussians_matches_adaptive_quadrature():
    rng = np.random.default_rng(0)
    cases = [(0, 0, 1, 0), (0.3, -1, 0.3, 0.7), (-1, 0.5, 2, -2), (0, 2, 0, -6), (0, 0, 20, 0), (0, -8, 0.1, 4),
             (5, 3, -5, -7), (0, 0, 0, 0), (0.3, 2 * math.log(0.1), 1.1, 2 * math.log(3.0))]
    cases += [tuple(rng.normal(0, [2, 3, 2, 3])) for _ in range(30)]      # widths from e^-4.5 to e^4.5
    ref = torch.tensor([jsd_quad(*c) for c in cases], dtype=torch.float64)
    got = inv.jsd_gaussians(*(torch.tensor([c[i] for c in cases], dtype=torch.float64) for i in range(4)))
    err = (got - ref).abs().max().item()
    assert err <= 1e-8, err
    # batched shapes and symmetry still hold
    a = [torch.tensor(rng.normal(size=(3, 4))) for _ in range(4)]
    assert torch.allclose(inv.jsd_gaussians(*a), inv.jsd_gaussians(a[2], a[3], a[0], a[1]), atol=1e-12)
    with pytest.raises(InputError, match="panels and order"): inv.jsd_gaussians(*a, order=0)


# --- 2. VFAE's MMD penalty: the paper's sum over pairs of nuisance groups ------------------------------------------

def gaussian_kernel_mmd_bruteforce(a, b, bw):
    "Biased MMD² written as three explicit double loops."
    k = lambda u, v: math.exp(-float(((u - v) ** 2).sum()) / bw)
    n, m = len(a), len(b)
    return (sum(k(a[i], a[j]) for i in range(n) for j in range(n)) / n ** 2
            + sum(k(b[i], b[j]) for i in range(m) for j in range(m)) / m ** 2
            - 2 * sum(k(a[i], b[j]) for i in range(n) for j in range(m)) / (n * m))


def test_vfae_mmd_penalty_is_the_sum_over_pairs_of_groups():
    g = make_generator(0)
    z = torch.randn(30, 3, generator=g, dtype=torch.float64)
    s = torch.randint(0, 4, (30, 2), generator=g)               # two nuisance factors with 4 values each
    s[s[:, 1] == 2, 1] = 3                                      # factor 1: value 2 absent from the batch
    total = 0.0
    for f in range(2):
        vals = sorted(set(s[:, f].tolist()))
        for i, u in enumerate(vals):
            for v in vals[i + 1:]:
                total += gaussian_kernel_mmd_bruteforce(z[s[:, f] == u].numpy(), z[s[:, f] == v].numpy(), 3.0)
    got = sum(invb.mmd_between_groups(z, s[:, f]) for f in range(2))
    assert abs(float(got) - total) < 1e-12
    # differs from the old "each value against all the rest" when a nuisance has more than 2 values
    old = sum(invb.mmd_gaussian(z[s[:, f] == v], z[s[:, f] != v]) for f in range(2) for v in set(s[:, f].tolist()))
    assert abs(float(old) - total) > 1e-3
    # the objective uses it: its logged mmd term equals the pair sum on the codes it saw
    from disentbook.nets import VAE
    obj = invb.VFAE(nuisance_sizes=(4, 4), latent_dim=16)
    model = VAE(28, 3, 16, hidden=16)
    torch.manual_seed(0)
    x = torch.rand(6, 3, 28, 28, generator=g)
    batch = dict(x=x[:3], x2=x[3:], labels=torch.tensor([0, 1, 2]), s=torch.tensor([[0, 1], [1, 2], [2, 3]]),
                 s2=torch.tensor([[3, 1], [0, 0], [1, 2]]), k=torch.ones(3, dtype=torch.long))
    torch.manual_seed(1); out = obj(model, batch, 0)
    torch.manual_seed(1); _, _, _, _, zz, _ = obj._cond_terms(model, batch)
    ss = torch.cat([batch["s"], batch["s2"]])
    want = sum(gaussian_kernel_mmd_bruteforce(zz[ss[:, f] == u].detach().numpy(), zz[ss[:, f] == v].detach().numpy(), zz.shape[1])
               for f in range(2) for u in range(4) for v in range(u + 1, 4) if (ss[:, f] == u).any() and (ss[:, f] == v).any())
    assert abs(out["mmd"].item() - want) < 1e-5


# --- 3. The MMD U-statistic is unbiased -------------------------------------------------------------------------

def test_mmd_u_statistic_is_unbiased_by_simulation():
    def kernel_mean(delta, s2, bw):     # E exp(-||u - v||² / bw) for u - v ~ N(delta, s2 I), per coordinate
        return float(np.prod((1 + 2 * s2 / bw) ** -0.5 * np.exp(-np.asarray(delta) ** 2 / (bw + 2 * s2))))
    bw, mu2, sd2, d = 1.5, np.array([0.5, -0.3, 0.2]), 0.7, 3
    pop = kernel_mean(np.zeros(d), 2.0, bw) + kernel_mean(np.zeros(d), 2 * sd2 ** 2, bw) - 2 * kernel_mean(-mu2, 1 + sd2 ** 2, bw)
    g = make_generator(3)
    R, n, m = 40_000, 3, 5
    a = torch.randn(R, n, d, generator=g, dtype=torch.float64)
    b = torch.from_numpy(mu2) + sd2 * torch.randn(R, m, d, generator=g, dtype=torch.float64)
    u, v = invb.mmd_gaussian(a, b, bw, unbiased=True), invb.mmd_gaussian(a, b, bw)
    se = u.std().item() / math.sqrt(R)
    assert abs(u.mean().item() - pop) < 4 * se, (u.mean().item(), pop, se)
    assert v.mean().item() - pop > 20 * se                      # the V-statistic is biased upwards at n = 3, m = 5
    # one replicate, against the definition written out
    k = lambda x, y: math.exp(-float(((x - y) ** 2).sum()) / bw)
    A, B = a[0].numpy(), b[0].numpy()
    want = (sum(k(A[i], A[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
            + sum(k(B[i], B[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
            - 2 * sum(k(A[i], B[j]) for i in range(n) for j in range(m)) / (n * m))
    assert abs(u[0].item() - want) < 1e-12
    with pytest.raises(InputError, match="at least 2 samples"): invb.mmd_gaussian(a[0, :1], b[0], unbiased=True)


# --- 4. explicitness: the reference (multinomial) convention by default ----------------------------------------------

def test_explicitness_default_is_disentanglement_libs_computation():
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler
    z, f = toy_representation(1200, [3, 6, 10], noise=0.3, seed=4)
    ztr, ftr, zte, fte = z[:800], f[:800], z[800:], f[800:]
    sc = StandardScaler().fit(ztr)
    per_factor = []
    for k in range(f.shape[1]):        # disentanglement_lib's explicitness_per_factor, scikit-learn >= 0.22
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(sc.transform(ztr), ftr[:, k])
        auc = lambda x, y: np.mean([roc_auc_score(y == c, p) for c, p in zip(clf.classes_, clf.predict_proba(sc.transform(x)).T)])
        per_factor.append((auc(ztr, ftr[:, k]), auc(zte, fte[:, k])))
    want = tuple(np.mean(per_factor, 0))
    got = explicitness(ztr, ftr, zte, fte)
    assert got == pytest.approx(want, abs=1e-9)
    assert explicitness(ztr, ftr, zte, fte, multi_class="ovr") != pytest.approx(want, abs=1e-6)   # a different convention


# --- 5. the exact aggregate posterior of a finite data set ---------------------------------------------------------

def test_exact_aggregate_posterior_is_the_mixture_density():
    g = make_generator(7)
    N, D, P = 9, 4, 13
    mu, lv = torch.randn(N, D, generator=g, dtype=torch.float64), 0.6 * torch.randn(N, D, generator=g, dtype=torch.float64)
    z = 2 * torch.randn(P, D, generator=g, dtype=torch.float64)
    sd = (0.5 * lv).exp().numpy()
    dens = np.mean([stats.multivariate_normal(mu[n].numpy(), np.diag(sd[n] ** 2)).pdf(z.numpy()) for n in range(N)], 0)
    marg = sum(np.log(np.mean([stats.norm(mu[n, d].item(), sd[n, d]).pdf(z[:, d].numpy()) for n in range(N)], 0)) for d in range(D))
    lq, lm = exact_log_densities(z, mu, lv, chunk_size=5)
    assert np.allclose(lq.numpy(), np.log(dens), atol=1e-10, rtol=0) and np.allclose(lm.numpy(), marg, atol=1e-10, rtol=0)
    # far from every component the log stays finite (where the density itself underflows)
    far = exact_log_densities(torch.full((1, D), 60.0, dtype=torch.float64), mu, lv)[0]
    assert torch.isfinite(far).all() and far.item() < -500
    assert torch.allclose(exact_log_densities(z, mu[:1], lv[:1])[0], gaussian_log_density(z, mu[0], lv[0]).sum(1), atol=1e-12)
    with pytest.raises(InputError, match="expected points"): exact_log_densities(z[:, :2], mu, lv)
