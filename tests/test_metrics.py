"Golden-value tests of disentbook.eval.metrics: hand-computed cases, invariances, edge cases and error paths (fast)."
import math, warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import mutual_info_score, roc_auc_score

from disentbook.core import InputError
from disentbook.eval.metrics import (DCI_TOLERANCE, MetricWarning, _mean_auc, dci, dci_from_importance, discretize, entropy, explicitness, grid_factors, irs, mig, mig_from_mi, modularity, modularity_from_mi, mutual_info, sap, sap_matrix, toy_representation)

LOG2 = math.log(2)


def h2(*p):
    return -sum(x * math.log2(x) for x in p if x > 0)


@pytest.fixture(scope="module")
def grid():
    "Full grid of a 3-valued and a 5-valued factor: distinct factors are exactly independent."
    return grid_factors([3, 5], repeat=20)


@pytest.fixture(scope="module")
def bits():
    return grid_factors([2, 2], repeat=50)


@pytest.fixture(scope="module")
def noise():
    rng = np.random.default_rng(1)
    return rng.standard_normal((4000, 4)), np.random.default_rng(2).integers(0, 4, (4000, 3))


def affine(z, perm, scale, shift):
    return z[:, perm] * np.asarray(scale) + np.asarray(shift)


# ---- discretisation, entropy, mutual information ---------------------------------------------------

def test_discretize_by_hand():
    assert discretize(np.arange(5.0)[:, None], 4)[:, 0].tolist() == [0, 1, 2, 3, 3]
    assert discretize(np.array([[-1.0, 7.0], [0.0, 7.0], [1.0, 7.0]]), 2).tolist() == [[0, 0], [1, 0], [1, 0]]
    assert discretize(np.linspace(0, 1, 21)[:, None])[:, 0].tolist() == list(range(20)) + [19]


def test_discretize_matches_histogram_edges():
    x = np.random.default_rng(0).standard_normal((1000, 3)) * [1, 100, 1e-3]
    for nb in (1, 7, 20):
        b = discretize(x, nb)
        assert b.min() >= 0 and b.max() == nb - 1
        for d in range(3):
            ref = np.digitize(x[:, d], np.histogram(x[:, d], nb)[1][:-1]) - 1
            np.testing.assert_array_equal(b[:, d], ref)


def test_entropy_by_hand():
    np.testing.assert_allclose(entropy([0, 1, 0, 1]), [LOG2], atol=1e-12)
    np.testing.assert_allclose(entropy([0, 0, 0, 1]), [-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))], atol=1e-12)
    np.testing.assert_allclose(entropy(grid_factors([2, 3])), [LOG2, math.log(3)], atol=1e-12)
    assert entropy(np.full((6, 1), 4)).tolist() == [0.0]


def test_mutual_info_by_hand(bits):
    np.testing.assert_allclose(mutual_info(bits[:, :1], bits[:, :1]), [[LOG2]], atol=1e-12)  # identical fair bits
    assert mutual_info(bits[:, :1], bits[:, 1:]).tolist() == [[0.0]]                       # independent fair bits
    assert mutual_info(np.zeros((10, 1), int), np.arange(10)[:, None]).tolist() == [[0.0]]
    np.testing.assert_allclose(mutual_info(np.arange(9)[:, None], np.arange(9)[:, None] // 3), [[math.log(3)]], atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_mutual_info_equals_sklearn_per_pair(seed):
    rng = np.random.default_rng(seed)
    zd = rng.integers(0, 20, (400, 5)); zd[:, 4] = 3
    f = np.c_[rng.integers(-3, 3, 400) * 7, rng.integers(0, 40, 400), zd[:, 0] // 2]
    mi = mutual_info(zd, f)
    ref = [[mutual_info_score(zd[:, i], f[:, k]) for k in range(3)] for i in range(5)]
    np.testing.assert_allclose(mi, ref, atol=1e-12)
    assert mi.shape == (5, 3) and mi[4].tolist() == [0.0] * 3


def test_mutual_info_chunked(monkeypatch):
    "The chunked path (huge tables) gives the same matrix as the single bincount."
    import disentbook.eval.metrics as M
    rng = np.random.default_rng(3)
    zd, f = rng.integers(0, 6, (300, 4)), rng.integers(0, 5, (300, 5))
    full = mutual_info(zd, f)
    monkeypatch.setattr(M, "_MAX_CELLS", 300 * 4 * 2)
    np.testing.assert_allclose(mutual_info(zd, f), full, atol=1e-14)


def test_torch_inputs(grid):
    t = torch.from_numpy(grid)
    assert mig(t.float(), t) == pytest.approx(1.0, abs=1e-12)
    assert discretize(t.double()).tolist() == discretize(grid.astype(float)).tolist()


# ---- MIG ------------------------------------------------------------------------------------------

def test_mig_golden(grid):
    assert mig(grid, grid) == pytest.approx(1.0, abs=1e-12)
    assert mig(affine(grid, [1, 0], [-2.5, 0.01], [3.0, -7.0]), grid) == pytest.approx(1.0, abs=1e-12)
    assert mig(grid[:, [0, 0, 1]], grid) == pytest.approx(0.5, abs=1e-12)  # duplicated code: gap 0 for factor 0
    assert mig(np.ones((len(grid), 3)), grid) == 0.0
    # an exact hand value: code 0 = factor 0, code 1 = factor 0 // 2 (3 values -> bits {0,0,1}) on a 3x5 grid
    h0 = math.log(3)
    mi01 = h2(2 / 3, 1 / 3) * LOG2  # I(v0 // 2; v0) = H(v0 // 2)
    exp = ((h0 - mi01) / h0 + 1.0) / 2
    assert mig(np.c_[grid[:, 0], grid[:, 0] // 2, grid[:, 1]], grid) == pytest.approx(exp, abs=1e-12)


def test_mig_invariance_and_noise(noise):
    z, f = toy_representation(2000, [4, 6, 10], noise=0.05)
    base = mig(z, f)
    assert base > 0.8
    rs = np.random.default_rng(3)
    for _ in range(3):
        assert mig(affine(z, rs.permutation(3), rs.choice([-3.0, 0.5, 2.0], 3), rs.standard_normal(3)), f) == pytest.approx(base, abs=1e-9)
    assert mig(*noise) < 0.01


def test_mig_binned_vs_exact():
    g = grid_factors([40, 3], repeat=2)
    assert mig_from_mi(mutual_info(g, g), entropy(g)) == pytest.approx(1.0, abs=1e-12)
    assert mig(g, g) < 0.95  # 40 values in 20 bins lose information


def test_mig_constant_factor(grid):
    with pytest.warns(MetricWarning, match="constant"):
        assert mig(grid, np.c_[grid, np.zeros(len(grid), int)]) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(InputError, match="every factor is constant"): mig(grid, np.zeros((len(grid), 2), int))


# ---- SAP ------------------------------------------------------------------------------------------

def test_sap_continuous_golden(grid):
    assert sap(grid, grid, continuous=True) == pytest.approx(1.0, abs=1e-12)
    assert sap(affine(grid, [1, 0], [-3.0, 0.2], [1.5, 1.5]), grid, continuous=True) == pytest.approx(1.0, abs=1e-12)
    assert sap(grid[:, [0, 0, 1]], grid, continuous=True) == pytest.approx(0.5, abs=1e-12)
    assert sap(np.zeros((len(grid), 3)), grid, continuous=True) == 0.0
    # squared correlation by hand: z = v0 + 2 v1 on two fair independent bits: cov(z, v0)^2 / (var z var v0) = 1/5
    b = grid_factors([2, 2])
    S = sap_matrix(np.c_[b[:, 0] + 2 * b[:, 1], np.zeros(4)], b, continuous=True)
    np.testing.assert_allclose(S, [[0.2, 0.8], [0.0, 0.0]], atol=1e-12)


def test_sap_discrete_golden(bits):
    assert sap(bits, bits, bits, bits) == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_allclose(sap_matrix(bits, bits, bits, bits), [[1.0, 0.5], [0.5, 1.0]], atol=1e-12)
    assert sap(np.ones((len(bits), 2)), bits, bits, bits) == 0.0  # inactive codes score 0 (not the majority rate)
    assert sap(bits, bits, bits, bits, n_jobs=2) == pytest.approx(0.5, abs=1e-12)


def test_sap_ignores_one_code_for_two_factors(bits):
    "A single code carrying two factors still wins both columns: SAP stays high (modularity catches it)."
    z = np.c_[2 * bits[:, 0] + bits[:, 1], np.random.default_rng(5).standard_normal(len(bits))]
    assert sap(z, bits, continuous=True) > 0.45
    assert modularity(z[:, :1], bits) == pytest.approx(0.0, abs=1e-12)


def test_sap_unseen_test_values(bits):
    "Issue 14: test labels never seen in training made every accuracy 0 and SAP 0; now an InputError says which."
    bt = bits.copy(); bt[:4, 1] = [5, 5, 9, 9]
    with pytest.raises(InputError, match=r"factor 1 of factors_test has 2 value\(s\) never seen.*\[5, 9\]"):
        sap(bits, bits, bits, bt)
    with pytest.raises(InputError, match="factor 1"): sap_matrix(bits, bits, bits, bt)
    assert sap(bits, bits, bits, bt, continuous=True) == pytest.approx(1.0)  # the continuous SAP ignores the test split
    assert sap(bits, bits, bits[:2], bits[:2]) >= 0.0                      # a test split with fewer values is fine


def test_sap_noise(noise):
    z, f = noise
    assert sap(z, f, continuous=True) < 0.01
    assert sap(z[:2000], f[:2000], z[2000:], f[2000:]) < 0.03


# ---- DCI ------------------------------------------------------------------------------------------

def test_dci_from_importance_closed_forms():
    assert dci_from_importance(np.eye(4)) == (1.0, 1.0)
    assert dci_from_importance(np.eye(3)[[0, 2, 1]] * [1.0, 5.0, 0.2]) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert dci_from_importance(np.ones((3, 5))) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert dci_from_importance(np.r_[np.ones((1, 4)), np.zeros((3, 4))]) == pytest.approx((0.0, 1.0), abs=1e-12)
    assert dci_from_importance([[3.0, 1.0], [0.0, 2.0]]) == pytest.approx((0.459148, 0.540852), abs=1e-6)
    # one factor spread uniformly over 3 of L=4 codes, another on one code: D = 1 for every code,
    # C = (1 - log 3 / log 4) / 2 + 1 / 2 (both factors carry half the importance)
    R = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    assert dci_from_importance(R) == pytest.approx((1.0, (1 - math.log(3) / math.log(4)) / 2 + 0.5), abs=1e-12)
    # a code split (1/2, 1/2) between 2 of K=4 factors: D_l = 1 - log 2 / log 4 = 1/2
    assert dci_from_importance([[1.0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])[0] == pytest.approx(0.5 * 0.5 + 0.5, abs=1e-12)


def test_dci_from_importance_edge_cases():
    assert dci_from_importance(np.r_[np.eye(2), np.zeros((1, 2))]) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert dci_from_importance([[2.0], [0.0]]) == (1.0, 1.0)
    assert dci_from_importance([[2.0, 1.0]]) == pytest.approx((1 - h2(2 / 3, 1 / 3), 1.0), abs=1e-12)
    with pytest.warns(MetricWarning, match="all zero"):
        assert dci_from_importance(np.zeros((2, 3))) == (0.0, 0.0)
    with pytest.raises(InputError, match="non-negative"): dci_from_importance([[1.0, -0.1]])
    with pytest.raises(InputError, match="non-negative"): dci_from_importance([[1.0, np.nan]])
    with pytest.raises(InputError, match=r"\(L, K\)"): dci_from_importance([1.0, 2.0])


@pytest.mark.parametrize("learner", ["hgb", "gbc"])
def test_dci_golden(learner):
    g = grid_factors([3, 4], repeat=10)
    r = dci(g, g, g, g, learner=learner)
    assert (r["disentanglement"], r["completeness"]) == pytest.approx((1.0, 1.0), abs=1e-6)
    assert (r["informativeness_train"], r["informativeness_test"]) == (1.0, 1.0)
    np.testing.assert_allclose(r["importance"], np.eye(2), atol=1e-6)
    zp = affine(g, [1, 0], [-2.0, 0.5], [3.0, 3.0])
    np.testing.assert_allclose(dci(zp, g, zp, g, learner=learner)["importance"], np.eye(2)[::-1], atol=1e-6)
    # a duplicated code shares its factor's importance with its copy (evenly for hgb, by a seeded lottery for gbc)
    r = dci(np.c_[g, g[:, 0]], g, np.c_[g, g[:, 0]], g, learner=learner)
    np.testing.assert_allclose(r["importance"][:, 1], [0.0, 1.0, 0.0], atol=1e-6)
    assert r["importance"][1, 0] < 1e-6 and r["importance"][[0, 2], 0].sum() == pytest.approx(1.0)
    if learner == "hgb": np.testing.assert_allclose(r["importance"][[0, 2], 0], [0.5, 0.5], atol=1e-6)
    else: assert r["importance"][[0, 2], 0].min() > 0.2


def test_dci_duplicated_codes_golden():
    "Every factor stored twice (K = 3, L = 6): D = 1 and, split evenly, C = 1 - ln 2 / ln 6 (issue 14: was 1.0)."
    g = grid_factors([3, 4, 5], repeat=2)
    z = np.c_[g, g]
    c_even = 1 - math.log(2) / math.log(6)
    r = dci(z, g, z, g)                                                  # the default learner
    assert r["completeness"] == pytest.approx(c_even, abs=1e-6) and r["disentanglement"] == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(r["importance"], np.r_[np.eye(3), np.eye(3)] / 2, atol=1e-6)
    ref = dci(z, g, z, g, learner="gbc")                                 # the reference: a random split of the ties
    assert ref["completeness"] == pytest.approx(c_even, abs=0.02) and ref["disentanglement"] == pytest.approx(1.0, abs=1e-6)
    # a monotone (decreasing) copy ties as well
    r = dci(np.c_[g, 1 - 2.0 * g[:, :1]], g, np.c_[g, 1 - 2.0 * g[:, :1]], g)
    np.testing.assert_allclose(r["importance"][:, 0], [0.5, 0, 0, 0.5], atol=1e-6)


def test_dci_constant_codes_and_noise(noise):
    g = grid_factors([3, 4], repeat=10)
    with pytest.warns(MetricWarning):
        r = dci(np.ones((len(g), 3)), g, np.ones((len(g), 3)), g)
    assert (r["disentanglement"], r["completeness"]) == (0.0, 0.0) and (r["importance"] == 0).all()
    z, f = noise
    r = dci(z[:1000], f[:1000], z[1000:2000], f[1000:2000])
    assert abs(r["informativeness_test"] - 0.25) < 0.05 and r["disentanglement"] < 0.1


def test_dci_hgb_close_to_reference():
    "The fast learner stays within DCI_TOLERANCE of GradientBoostingClassifier on a small mixed representation."
    z, f = toy_representation(900, [3, 4, 2], noise=0.2, mixing=0.4, seed=3)
    a = dci(z[:600], f[:600], z[600:], f[600:], learner="hgb")
    b = dci(z[:600], f[:600], z[600:], f[600:], learner="gbc", n_jobs=1)
    for k in ("disentanglement", "completeness", "informativeness_test"):
        assert abs(a[k] - b[k]) <= DCI_TOLERANCE, (k, a[k], b[k])


def test_dci_hgb_close_to_reference_on_duplicated_codes():
    """The same representation with every code duplicated. The reference splits ties by a seeded lottery (its
    completeness ranged 0.508-0.542 over seeds 0-5 here), so compare with its importances averaged over 3 seeds."""
    z, f = toy_representation(900, [3, 4, 2], noise=0.2, mixing=0.4, seed=3)
    z = np.c_[z, z]
    a = dci(z[:600], f[:600], z[600:], f[600:])
    R = np.mean([dci(z[:600], f[:600], z[600:], f[600:], learner="gbc", seed=s)["importance"] for s in range(3)], 0)
    d, c = dci_from_importance(R)
    assert abs(a["disentanglement"] - d) <= DCI_TOLERANCE and abs(a["completeness"] - c) <= DCI_TOLERANCE, (a, d, c)
    assert a["completeness"] < 0.6  # not the 0.81 of the codes without copies: the redundancy is visible


def test_dci_constant_factor():
    g = grid_factors([3, 4], repeat=5)
    f = np.c_[g, np.zeros(len(g), int)]
    with pytest.warns(MetricWarning, match="constant"):
        r = dci(g, f, g, f)
    assert r["importance"][:, 2].tolist() == [0.0, 0.0] and r["informativeness_test"] == 1.0


# ---- modularity, explicitness -----------------------------------------------------------------------

def test_modularity_golden(grid):
    assert modularity(grid, grid) == pytest.approx(1.0, abs=1e-12)
    assert modularity(affine(grid, [1, 0], [-4.0, 0.3], [2.0, 2.0]), grid) == pytest.approx(1.0, abs=1e-12)
    assert modularity_from_mi([[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]]) == pytest.approx(0.25, abs=1e-12)
    assert modularity_from_mi([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]]) == pytest.approx(0.5, abs=1e-12)
    assert modularity_from_mi([[0.5], [0.0]]) == 0.5
    assert modularity(np.ones((len(grid), 2)), grid) == 0.0
    with pytest.raises(InputError, match="non-negative"): modularity_from_mi([[1.0, -1.0]])


def test_explicitness(bits, noise):
    assert explicitness(bits, bits, bits, bits) == (1.0, 1.0)
    z, f = noise
    tr, te = explicitness(z[:2000], f[:2000], z[2000:], f[2000:])
    assert abs(te - 0.5) < 0.03
    z, f = toy_representation(1500, [3, 6, 10], noise=0.1)
    assert explicitness(z[:1000], f[:1000], z[1000:], f[1000:])[1] > 0.8
    # a constant code does not break the standardisation
    tr, te = explicitness(np.c_[bits, np.ones(len(bits))], bits, np.c_[bits, np.ones(len(bits))], bits)
    assert (tr, te) == (1.0, 1.0)


@pytest.mark.parametrize("multi_class", ["ovr", "multinomial"])
def test_explicitness_conventions_golden(grid, bits, multi_class):
    "Perfect codes: AUC 1 in both conventions (binary factors, and the 3 x 5 grid's factors as codes)."
    assert explicitness(bits, bits, bits, bits, multi_class=multi_class) == (1.0, 1.0)
    assert explicitness(grid, grid, grid, grid, multi_class=multi_class) == pytest.approx((1.0, 1.0), abs=1e-12)


def test_explicitness_conventions_close():
    "One-vs-rest (Ridgeway & Mozer) and multinomial (disentanglement_lib under sklearn >= 0.22) differ little."
    z, f = toy_representation(1500, [3, 6, 10], noise=0.1)
    ovr = explicitness(z[:1000], f[:1000], z[1000:], f[1000:], multi_class="ovr")
    mn = explicitness(z[:1000], f[:1000], z[1000:], f[1000:])
    assert mn == explicitness(z[:1000], f[:1000], z[1000:], f[1000:], multi_class="multinomial")  # the default
    assert ovr != mn and abs(ovr[0] - mn[0]) < 0.05 and abs(ovr[1] - mn[1]) < 0.05
    b = toy_representation(1000, [2, 2], noise=0.8, seed=1)                                # binary: one regression
    assert explicitness(*b, *b) == pytest.approx(explicitness(*b, *b, multi_class="multinomial"), abs=1e-3)


def test_mean_auc_equals_sklearn():
    p, y = np.random.default_rng(6).random((60, 4)), np.random.default_rng(7).integers(0, 4, 60)
    p[:10, 0] = 0.5  # ties
    assert _mean_auc(y, p, np.arange(4)) == pytest.approx(np.mean([roc_auc_score(y == c, p[:, c]) for c in range(4)]), abs=1e-12)
    assert _mean_auc(np.zeros(5, int), p[:5], np.arange(4)) != _mean_auc(np.zeros(5, int), p[:5], np.arange(4))  # nan


# ---- IRS ------------------------------------------------------------------------------------------

def test_irs_golden(grid):
    assert irs(grid, grid) == pytest.approx(1.0, abs=1e-12)
    assert irs(np.c_[affine(grid, [1, 0], [-2.0, 0.7], [1.0, 1.0]), grid[:, 0]], grid) == pytest.approx(1.0, abs=1e-12)
    b = grid_factors([2, 2], repeat=25)
    assert irs(np.c_[b, b.sum(1)], b) == pytest.approx(0.75, abs=1e-12)  # hand value, see the notebook
    with pytest.warns(MetricWarning, match="constant"):
        assert irs(np.ones((len(grid), 2)), grid) == 0.0
    z, f = toy_representation(2000, [3, 6, 10], noise=0.05)
    assert irs(z, f) > 0.8 > irs(np.random.default_rng(0).standard_normal(z.shape), f)


def test_irs_every_factor_constant(noise):
    "Issue 14: IRS of all-constant factors returned 0.255 (the noise baseline of the codes)."
    z, _ = noise
    with pytest.raises(InputError, match="every factor is constant"): irs(z, np.zeros((len(z), 2), int))


def test_irs_constant_factor_left_out(grid, noise):
    with pytest.warns(MetricWarning, match="constant"):
        assert irs(grid, np.c_[grid, np.full(len(grid), 3)]) == pytest.approx(1.0, abs=1e-12)
    z, f = noise
    with pytest.warns(MetricWarning, match="constant"):
        assert irs(z, np.c_[f, np.zeros(len(f), int)]) == pytest.approx(irs(z, f), abs=1e-12)


def test_irs_quantile_by_hand():
    "One bit factor, one code: within each group the code is {0, 1, 2} + 10 v; |dev| = {1, 0, 1}, M = 11."
    v = np.repeat([0, 1], 3)
    z = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 12.0])[:, None]
    # quantile q of {0, 1, 1} (linear): q = 0.5 -> 1; q = 1/3 -> 2/3 * ... computed directly:
    for q in (0.5, 0.99, 0.2):
        e = np.quantile([0.0, 1.0, 1.0], q)
        assert irs(z, v, diff_quantile=q) == pytest.approx(1 - e / 6.0, abs=1e-12)


# ---- invalid inputs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda g: mig(g, g[:-1]), "mismatched"),
    (lambda g: mig(np.where(g == 0, np.nan, g), g), "NaN"),
    (lambda g: mig(g[:1], g[:1]), "at least 2 samples"),
    (lambda g: mig(g, g + 0.5), "integer labels"),
    (lambda g: mig(g[:, :1], g), "at least 2 code"),
    (lambda g: mig(g[:, 0], g), "vector"),
    (lambda g: mig(g, g, num_bins=0), "num_bins"),
    (lambda g: mutual_info(g + 0.5, g), "integer labels"),
    (lambda g: sap(g, g), "needs codes_test"),
    (lambda g: sap(g, g, g[:, :1], g), "test has 1 codes"),
    (lambda g: sap(g, g, g, g[:-1]), "mismatched"),
    (lambda g: sap(g[:, :1], g, continuous=True), "at least 2 code"),
    (lambda g: dci(g, g, g, g, learner="xgb"), "learner"),
    (lambda g: dci(g, g, g[:5], g), "mismatched"),
    (lambda g: dci(g, np.zeros_like(g), g, g), "every factor is constant"),
    (lambda g: explicitness(g, g + 0.5, g, g), "integer labels"),
    (lambda g: explicitness(g, g, g, g, multi_class="auto"), "multi_class"),
    (lambda g: irs(g, np.zeros_like(g)), "every factor is constant"),
    (lambda g: sap(g, g, g, g + 1), "never seen"),
    (lambda g: irs(g, g, diff_quantile=0.0), "diff_quantile"),
    (lambda g: irs(g, g, diff_quantile=1.5), "diff_quantile"),
    (lambda g: modularity(g, g[:-2]), "mismatched"),
])
def test_invalid_inputs(grid, call, match):
    with pytest.raises(InputError, match=match): call(grid)
