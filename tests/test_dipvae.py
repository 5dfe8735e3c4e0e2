"Golden-value tests of disentbook.dipvae: covariance penalties, objectives, the paper's SAP and Z-diff, checkers."
import math

import numpy as np
import pytest
import torch

from disentbook.core import InputError
from disentbook.objectives.dipvae import (DIPVAEI, DIPVAEII, check_dip_covariance, check_dip_penalty, check_total_covariance, dip_covariance, dip_penalty, mean_covariance, third_moment_penalty, third_moments, total_covariance)
from disentbook.eval.dipvae import (DSPRITES_FACTOR_TYPES, sap_dipvae, sap_matrix_dipvae, threshold_balanced_accuracy, zdiff_dipvae, zdiff_classifiers, hinge_bias, attribute_accuracy)
from disentbook.eval.metrics import grid_factors
from disentbook.nets import VAE
from disentbook.eval.scores import SyntheticFactors, synthetic_representation
from disentbook.objectives.base import make_objective
from disentbook.objectives.vae import VAEObjective

MU_H = torch.tensor([[1.0, 0.0], [3.0, 2.0]])
LV_H = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).log()


def torch_diag_bug(mu, logvar):
    "The public-implementation bug: torch.diag of a (B, Z) tensor extracts a diagonal instead of building matrices."
    return torch.diag(logvar.exp()).mean(0) + mean_covariance(mu)


@pytest.mark.parametrize("cov,expected", [(torch.eye(10), 0.0), (torch.ones(10, 10), 90.0),
                                          (torch.zeros(10, 10), 10.0), (2 * torch.eye(10), 10.0)])
def test_dip_penalty_golden(cov, expected):
    assert dip_penalty(cov, 1.0, 1.0).item() == expected


def test_dip_penalty_weights():
    assert dip_penalty(torch.ones(10, 10), 2.0, 7.0).item() == 180.0
    assert dip_penalty(torch.zeros(10, 10), 2.0, 7.0).item() == 70.0
    with pytest.raises(InputError): dip_penalty(torch.ones(2, 3), 1.0, 1.0)


def test_dip_ii_covariance_hand_example():
    assert torch.allclose(dip_covariance(MU_H, LV_H, "ii"), torch.tensor([[3.0, 1.0], [1.0, 4.0]]))
    assert torch.allclose(dip_covariance(MU_H, LV_H, "i"), torch.ones(2, 2))
    assert torch.allclose(dip_covariance(MU_H, None, "i"), torch.ones(2, 2))
    with pytest.raises(InputError): dip_covariance(MU_H, None, "ii")
    with pytest.raises(InputError): dip_covariance(MU_H, LV_H, "iii")


def test_dip_ii_covariance_is_total_covariance():
    g = torch.Generator().manual_seed(0)
    mu, lv = torch.randn(7, 3, generator=g, dtype=torch.float64), torch.randn(7, 3, generator=g, dtype=torch.float64)
    expected = torch.diag(lv.exp().mean(0)) + torch.cov(mu.T, correction=0)
    assert torch.allclose(dip_covariance(mu, lv, "ii"), expected)
    assert torch.allclose(total_covariance(mu, torch.diag_embed(lv.exp())), expected)


def test_torch_diag_bug_differs():
    bug = torch_diag_bug(MU_H, LV_H)
    assert torch.allclose(bug, torch.full((2, 2), 3.5))
    assert not torch.allclose(bug, dip_covariance(MU_H, LV_H, "ii"))
    assert not check_dip_covariance(torch_diag_bug)


@pytest.mark.parametrize("kind", ["i", "ii"])
def test_gradients_finite_at_zero_variance(kind):
    mu = torch.full((8, 4), 0.3, requires_grad=True)           # constant across the batch
    lv = torch.full((8, 4), -300.0, requires_grad=True)         # sigma^2 underflows to 0
    (dip_penalty(dip_covariance(mu, lv, kind), 1.0, 10.0) + third_moment_penalty(mu, lv)).backward()
    assert torch.isfinite(mu.grad).all() and torch.isfinite(lv.grad).all()


def test_third_moments_closed_form():
    g = torch.Generator().manual_seed(1)
    mu = torch.empty(5, 2, dtype=torch.float64).exponential_(generator=g)
    lv = torch.randn(5, 2, generator=g, dtype=torch.float64) * 0.3
    n = 400_000
    idx = torch.randint(5, (n,), generator=g)
    z = mu[idx] + (0.5 * lv[idx]).exp() * torch.randn(n, 2, generator=g, dtype=torch.float64)
    zc = z - z.mean(0)
    assert (torch.einsum("ni,nj,nk->ijk", zc, zc, zc) / n - third_moments(mu, lv)).abs().max() < 0.05
    assert torch.allclose(third_moment_penalty(mu, lv), third_moments(mu, lv).pow(2).sum())
    # one latent, zero variance: the third central moment of the batch of means
    m = torch.tensor([[0.0], [0.0], [3.0]])
    assert torch.allclose(third_moments(m, torch.full_like(m, -200.0)), torch.tensor([[[((-1.0) ** 3 * 2 + 2.0 ** 3) / 3]]]))


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return VAE(image_size=28, latent_dim=4), (torch.rand(12, 1, 28, 28) > 0.5).float()


@pytest.mark.parametrize("name,cls,ratio", [("dip_vae_i", DIPVAEI, 10.0), ("dip_vae_ii", DIPVAEII, 1.0)])
def test_objectives(tiny, name, cls, ratio):
    model, x = tiny
    obj = make_objective(name, lambda_od=3.0)
    assert isinstance(obj, cls) and obj.lambda_d == 3.0 * ratio
    assert make_objective(**obj.config).config == obj.config
    t = obj(model, {"x": x}, 0)
    assert {"loss", "recon", "kl", "dip", "elbo"} <= set(t) and "third" not in t
    assert torch.allclose(t["loss"], t["recon"] + t["kl"] + t["dip"], atol=1e-4)
    mu, lv = model.encode(x)
    assert torch.allclose(t["dip"], dip_penalty(dip_covariance(mu, lv, cls.kind), 3.0, 3.0 * ratio), rtol=1e-4)
    t3 = cls(1.0, 2.0, lambda_3=5.0)(model, {"x": x}, 0)
    assert torch.allclose(t3["loss"], t3["recon"] + t3["kl"] + t3["dip"] + t3["third"], atol=1e-4)
    t3["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.zero_grad()
    torch.manual_seed(5); t0 = cls(0.0, 0.0, 0.0)(model, {"x": x}, 0)
    torch.manual_seed(5); tv = VAEObjective()(model, {"x": x}, 0)
    assert torch.allclose(t0["loss"], tv["loss"]) and t0["dip"].item() == 0.0
    with pytest.raises(InputError): cls(lambda_od=-1.0)


def test_threshold_balanced_accuracy():
    assert threshold_balanced_accuracy([0, 1, 2, 3, 4, 5], [0, 0, 1, 1, 2, 2]) == 1.0
    assert math.isclose(threshold_balanced_accuracy(np.zeros(9), [0, 0, 0, 0, 1, 1, 2, 2, 2]), 1 / 3)
    # unbalanced classes: predicting the majority class everywhere is worth 1/2, a threshold gets it all
    assert threshold_balanced_accuracy([0, 1, 2, 3, 10], [0, 0, 0, 0, 1]) == 1.0
    assert math.isclose(threshold_balanced_accuracy([0, 1, 2, 3, 10], [0, 1, 0, 0, 0], num_thresholds=0), 0.5)


def test_sap_dipvae_true_factors_and_constant_codes():
    rs = np.random.default_rng(0)
    grid = grid_factors((3, 6, 10, 8, 8))
    ftr, fte = grid[rs.permutation(len(grid))[:3000]], grid[rs.permutation(len(grid))[:3000]]
    assert math.isclose(sap_dipvae(ftr, ftr, fte, fte), 1.0, abs_tol=0.01)          # all continuous: ~1
    types = DSPRITES_FACTOR_TYPES[1:]                                                 # shape categorical, rest continuous
    S = sap_matrix_dipvae(ftr, ftr, fte, fte, types)
    gaps = np.sort(S, 0)[-1] - np.sort(S, 0)[-2]
    assert np.all(gaps[1:] > 0.99) and 2 / 3 - 0.05 < gaps[0] < 2 / 3               # shape: 1 - (1/3 + eps)
    assert math.isclose(sap_dipvae(ftr, ftr, fte, fte, types), (gaps[0] + gaps[1:].sum()) / 5)
    assert sap_dipvae(np.zeros((200, 4)), ftr[:200], np.zeros((200, 4)), fte[:200], types) == 0.0
    with pytest.raises(InputError): sap_dipvae(ftr, ftr, fte, fte, ("categorical",))


def test_zdiff_dipvae_perfect_and_reproducible():
    data = SyntheticFactors((3, 6, 10, 8))
    ident = synthetic_representation("identity", 4)
    kw = dict(num_train=200, num_eval=100, batch_size=16)
    r = zdiff_dipvae(data, ident, seed=3, **kw)
    assert r == (1.0, 1.0) and zdiff_dipvae(data, ident, seed=3, **kw) == r
    rot = synthetic_representation("rotated", 4, seed=1)
    assert zdiff_dipvae(data, rot, seed=3, **kw) == zdiff_dipvae(data, rot, seed=3, **kw)


def test_checkers_accept_references_and_reject_mistakes():
    assert check_dip_penalty(dip_penalty)
    assert check_dip_covariance(lambda m, lv: dip_covariance(m, lv, "ii"))
    assert check_dip_covariance(lambda m, lv: mean_covariance(m), kind="i")
    assert check_total_covariance(total_covariance)
    assert not check_dip_penalty(lambda c, lo, ld: lo * torch.triu(c, 1).pow(2).sum() + ld * (torch.diagonal(c) - 1).pow(2).sum())
    assert not check_dip_penalty(lambda c, lo, ld: lo * c.pow(2).sum() + ld * torch.diagonal(c).pow(2).sum())
    r = check_dip_covariance(lambda m, lv: torch.cov(m.T) + torch.diag(lv.exp().mean(0)))   # unbiased Cov(mu)
    assert not r and "\n" not in r.message and r.hint
    assert not check_total_covariance(lambda m, s: s.mean(0) + m.T @ m / len(m))          # not centred


def test_zdiff_classifiers_same_features_as_zdiff():
    data, ident = SyntheticFactors((3, 6, 10, 8)), synthetic_representation("identity", 4)
    kw = dict(num_train=200, num_eval=100, batch_size=16)
    rot = synthetic_representation("rotated", 4, seed=1)
    r = zdiff_classifiers(data, rot, seed=2, **kw)
    assert set(r) == {"svm", "svm_train", "svm_standardized", "logistic", "svm_recall", "svm_standardized_recall"}
    assert set(r["svm_recall"]) == {0, 1, 2, 3} and all(0 <= v <= 1 for v in r["svm_recall"].values())
    assert (r["svm_train"], r["svm"]) == zdiff_dipvae(data, rot, seed=2, **kw)
    scaled = [zdiff_classifiers(data, lambda x, d=d: ident(x) / d, seed=2, **kw)["svm_standardized"] for d in (1, 1000)]
    assert scaled == [1.0, 1.0]                                  # standardised: scale-free


def _hinge(b, t, s): return np.maximum(0, 1 - s * (t + b)).sum()


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101])
def test_hinge_bias_is_the_exact_minimiser(n):
    rs = np.random.default_rng(n)
    t, s = rs.normal(size=n) * 2, rs.choice([-1, 1], n)
    b = hinge_bias(t, s)
    kinks = np.concatenate([1 - t[s == 1], -1 - t[s == -1]])
    assert math.isclose(_hinge(b, t, s), min(_hinge(k, t, s) for k in kinks), rel_tol=1e-12, abs_tol=1e-12)
    assert _hinge(b, t, s) <= min(_hinge(g, t, s) for g in np.linspace(-12, 12, 4801)) + 1e-12


def test_hinge_bias_golden():
    assert hinge_bias([0.0, 0.0], [1, -1]) == 0.0                # symmetric flat minimum: its midpoint
    assert hinge_bias([5.0, 6.0], [1, 1]) == -4.0                # H = 0 from b = 1 - min t
    assert hinge_bias([-1.0, 1.0], [-1, 1]) == 0.0               # separable with margin: H = 0 on [0, 0]
    with pytest.raises(InputError, match="NaN"): hinge_bias([0.0, np.nan], [1, -1])
    with pytest.raises(InputError, match="-1 / \\+1"): hinge_bias([0.0, 1.0], [0, 1])
    with pytest.raises(InputError, match="lengths"): hinge_bias([0.0], [1, -1])


def test_attribute_accuracy_golden_and_codings():
    rs, n = np.random.default_rng(0), 1000
    attrs = rs.integers(0, 2, (2 * n, 2))
    codes = np.c_[attrs[:, 0] * 3.0 + 0.2 * rs.normal(size=2 * n), rs.normal(size=(2 * n, 3))]
    acc = attribute_accuracy(codes[:n], attrs[:n], codes[n:], attrs[n:], ["signal", "noise"])
    assert acc["signal"] == 1.0 and abs(acc["noise"] - 0.5) < 0.07
    pm = attribute_accuracy(codes[:n], 2 * attrs[:n] - 1, codes[n:], 2 * attrs[n:] - 1, ["signal", "noise"])
    assert pm == acc                                             # CelebA's -1/+1 coding reads the same
    flipped = attribute_accuracy(codes[:n], 1 - attrs[:n], codes[n:], 1 - attrs[n:], ["signal", "noise"])
    assert flipped["signal"] == 1.0
    # the classifier has no trained direction: a code that only holds the attribute in a rotated,
    # heavily scaled subspace still reads it, because w is the class-mean difference
    R = np.linalg.qr(rs.normal(size=(4, 4)))[0] * 50
    assert attribute_accuracy(codes[:n] @ R, attrs[:n], codes[n:] @ R, attrs[n:], ["signal", "noise"])["signal"] == 1.0


def test_attribute_accuracy_bad_input():
    z, a = np.zeros((10, 3)), np.tile([0, 1], 5)[:, None]
    with pytest.raises(InputError, match="one value"): attribute_accuracy(z, np.ones((10, 1)), z, a)
    with pytest.raises(InputError, match="binary"): attribute_accuracy(z, a * 2, z, a)
    with pytest.raises(InputError, match="do not match"): attribute_accuracy(z[:9], a, z, a)
    with pytest.raises(InputError, match="names"): attribute_accuracy(z, a, z, a, ["a", "b"])
    with pytest.raises(InputError): attribute_accuracy(np.full((10, 3), np.nan), a, z, a)
