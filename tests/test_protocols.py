"Fast golden tests of disentbook.eval.protocols: the evaluation protocols of the contrastive, reference-based and invariance papers."
import json, math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from disentbook.core import InputError
from disentbook.eval.protocols import (chance_level, cluster_labels_tsne, clustering_accuracy, clustering_scores, group_accuracy, kmeans_labels, linear_probe_classification, linear_probe_regression, match_clusters, per_class_accuracy, reconstruction_error_per_pixel, silhouette, tsne_embedding, w2_empirical, w2_gaussian, w2_plan)


def blobs(n, k=4, dim=8, sep=12.0, seed=0):
    g = np.random.default_rng(seed)
    centres = g.normal(size=(k, dim)) * sep
    y = g.integers(0, k, n)
    return centres[y] + g.normal(size=(n, dim)), y


@pytest.fixture(scope="module")
def blob_scores():
    x, y = blobs(300)
    return x, y, clustering_scores(x, y, seed=0, return_embedding=True)


# ---- clustering accuracy and silhouette --------------------------------------------------------------

def test_clustering_accuracy_permuted_is_one():
    y = np.random.default_rng(0).integers(0, 6, 300)
    perm = np.array([5, 3, 0, 1, 4, 2])
    assert clustering_accuracy(y, perm[y]) == 1.0
    assert clustering_accuracy(torch.tensor(y), torch.tensor(perm[y] * 7 - 3)) == 1.0   # arbitrary ids, torch


def test_clustering_accuracy_hand_confusion():
    yt, yp = [0, 0, 0, 1, 1, 1, 2, 2, 2, 2], [1, 1, 0, 0, 0, 0, 2, 2, 2, 1]
    # contingency (cluster x class): [[1,3,0],[2,0,1],[0,0,3]] -> best matching 3 + 2 + 3
    assert match_clusters(yt, yp) == {0: 1, 1: 0, 2: 2}
    assert clustering_accuracy(yt, yp) == pytest.approx(0.8)


@pytest.mark.parametrize("yt, yp, expected", [([0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1], 4 / 6),   # fewer clusters
                                              ([0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 3, 3], 4 / 6),   # more clusters
                                              (list(range(6)), [0] * 6, 1 / 6)])
def test_clustering_accuracy_unequal_numbers(yt, yp, expected):
    assert clustering_accuracy(yt, yp) == pytest.approx(expected)


def test_clustering_accuracy_against_brute_force():
    from itertools import permutations
    g = np.random.default_rng(3)
    for _ in range(5):
        yt, yp = g.integers(0, 4, 40), g.integers(0, 4, 40)
        best = max(np.mean(np.array(p)[yp] == yt) for p in permutations(range(4)))
        assert clustering_accuracy(yt, yp) == pytest.approx(best)


def test_silhouette_hand():
    pts = np.array([[0.0], [1.0], [10.0], [11.0]])
    assert silhouette(pts, [0, 0, 1, 1]) == pytest.approx((9.5 / 10.5 + 8.5 / 9.5) / 2)
    assert silhouette(pts, [0, 1, 0, 1]) < 0
    with pytest.raises(InputError, match="distinct labels"): silhouette(pts, [1, 1, 1, 1])


def test_blobs_cluster_perfectly(blob_scores):
    x, y, res = blob_scores
    assert res["clustering_accuracy"] > 0.98 and res["silhouette"] > 0.5 and res["num_clusters"] == 4
    assert res["embedding"].shape == (300, 2) and res["clusters"].shape == (300,)
    raw = clustering_scores(torch.tensor(x), torch.tensor(y), tsne=False)
    assert raw["clustering_accuracy"] > 0.98 and raw["silhouette"] > 0.5
    assert set(raw) == {"clustering_accuracy", "silhouette", "num_clusters"}
    json.dumps(raw)                                          # plain floats for metrics.json
    cl = clustering_scores(x, y, tsne=False, silhouette_labels="cluster")
    assert cl["silhouette"] >= raw["silhouette"] - 1e-9     # k-means' own labels: at least as compact here


def test_random_labels_near_chance(blob_scores):
    x, _, res = blob_scores
    y = np.random.default_rng(1).integers(0, 4, len(x))
    ch = chance_level(y, res["embedding"])
    assert ch["nominal_accuracy"] == 0.25 and 0.25 <= ch["clustering_accuracy"] < 0.35
    assert -0.1 < ch["silhouette"] < 0.02                   # random labels: about 0, slightly negative
    r = clustering_scores(x, y, tsne=False)
    assert abs(r["clustering_accuracy"] - ch["clustering_accuracy"]) < 0.08 and abs(r["silhouette"]) < 0.1
    assert chance_level(y)["silhouette"] is None


def test_clustering_seeded():
    x, _ = blobs(100, seed=2)
    np.testing.assert_array_equal(cluster_labels_tsne(x, 4, seed=3), cluster_labels_tsne(x, 4, seed=3))
    np.testing.assert_array_equal(kmeans_labels(x, 4, seed=3), kmeans_labels(torch.tensor(x), 4, seed=3))
    with pytest.warns(UserWarning, match="perplexity"): assert tsne_embedding(x[:20], seed=0).shape == (20, 2)


@pytest.mark.parametrize("codes, labels, msg", [(np.zeros((5, 2)), [0, 1, 0, 1], "mismatched"),
                                                (np.full((4, 2), np.nan), [0, 1, 0, 1], "NaN"),
                                                (np.zeros((1, 2)), [0], "at least 2"),
                                                (np.zeros(4), [0, 1, 0, 1], "samples first"),
                                                (np.zeros((4, 2)), [0, 1.5, 0, 1], "integer"),
                                                (np.zeros((4, 2)), [1, 1, 1, 1], "2 classes")])
def test_clustering_bad_inputs(codes, labels, msg):
    with pytest.raises(InputError, match=msg): clustering_scores(codes, labels, tsne=False)


def test_clustering_accuracy_bad_inputs():
    with pytest.raises(InputError, match="mismatched"): clustering_accuracy([0, 1, 1], [0, 1])
    with pytest.raises(InputError, match="integer"): clustering_accuracy([0, 0.5], [0, 1])
    with pytest.raises(InputError, match="silhouette_labels"): clustering_scores(np.zeros((4, 2)), [0, 1, 0, 1], silhouette_labels="x")


# ---- Wasserstein-2 ----------------------------------------------------------------------------------

def test_w2_self_and_translate():
    z = np.random.default_rng(0).normal(size=(120, 3))
    t = np.array([1.0, -2.0, 0.5])
    assert w2_empirical(z, z) < 1e-12
    assert w2_empirical(z, z + t) == pytest.approx(5.25, abs=1e-9)
    assert w2_empirical(torch.tensor(z), torch.tensor(z[::-1].copy() + t), squared=False) == pytest.approx(math.sqrt(5.25))
    plan, cost = w2_plan(z, z + t)
    assert plan.shape == cost.shape == (120, 120) and plan.sum() == pytest.approx(1.0)


def test_w2_one_dimensional_sorted_matching():
    g = np.random.default_rng(1)
    u, v = g.normal(size=(100, 1)), g.exponential(size=(100, 1))
    assert w2_empirical(u, v) == pytest.approx(np.mean((np.sort(u[:, 0]) - np.sort(v[:, 0])) ** 2), abs=1e-9)
    # unequal sizes: quantile functions; mass 1/2 at 0 and 1 against 1/4 at 0, .5, 1, 1.5
    assert w2_empirical([[0.0], [1.0]], [[0.0], [0.5], [1.0], [1.5]]) == pytest.approx(0.125)


def test_w2_to_a_dirac_and_gaussians():
    g = np.random.default_rng(0)
    z = g.normal(size=(50, 2))
    assert w2_empirical(z, np.zeros((1, 2))) == pytest.approx((z ** 2).sum(1).mean())
    mu, sd = np.array([1.0, -0.5]), np.array([0.3, 1.2])        # contrastive paper, Lemma 2
    assert w2_gaussian(mu, np.diag(sd ** 2), np.zeros(2), np.zeros((2, 2))) == pytest.approx((mu ** 2).sum() + (sd ** 2).sum())
    assert w2_gaussian([0.0], [[4.0]], [1.0], [[1.0]]) == pytest.approx(2.0)    # 1-D: (m1-m2)^2 + (s1-s2)^2
    m1, m2 = np.array([0.0, 0.0]), np.array([2.0, -1.0])
    c1, c2 = np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([[0.4, -0.1], [-0.1, 2.0]])
    s1, s2 = g.multivariate_normal(m1, c1, 400), g.multivariate_normal(m2, c2, 400)
    emp, closed = w2_empirical(s1, s2), w2_gaussian(m1, c1, m2, c2)
    fitted = w2_gaussian(s1.mean(0), np.cov(s1.T), s2.mean(0), np.cov(s2.T))
    assert abs(emp - closed) < 0.15 * closed and abs(emp - fitted) < 0.03 * fitted


def test_w2_bad_inputs():
    z = np.zeros((4, 3))
    with pytest.raises(InputError, match="same dimension"): w2_empirical(z, z[:, :2])
    with pytest.raises(InputError, match="NaN"): w2_empirical(z, np.full((2, 3), np.nan))
    with pytest.raises(InputError, match="samples first"): w2_empirical(np.zeros(4), z)
    with pytest.raises(InputError, match="at least 1"): w2_empirical(np.zeros((0, 3)), z)


# ---- linear probes ----------------------------------------------------------------------------------

@pytest.fixture
def codes():
    g = np.random.default_rng(0)
    return g, g.normal(size=(400, 6)), g.normal(size=(300, 6))


def test_regression_exactly_linear(codes):
    g, ztr, zte = codes
    w, b = g.normal(size=(6, 3)), g.normal(size=3)
    r = linear_probe_regression(torch.tensor(ztr), ztr @ w + b, zte, torch.tensor(zte @ w + b))
    assert r["mae"].shape == (3,) and r["mae"].max() < 1e-9 and r["mean_mae"] < 1e-9
    r = linear_probe_regression(ztr, ztr[:, 2], zte, zte[:, 2])
    assert r["mae"].shape == (1,) and r["mean_mae"] < 1e-9


def test_regression_on_noise_is_the_mean_predictor(codes):
    g, ztr, zte = codes
    r = linear_probe_regression(ztr, g.normal(size=(400, 2)) * [1, 3], zte, g.normal(size=(300, 2)) * [1, 3])
    np.testing.assert_allclose(r["mae"], r["mean_predictor_mae"], rtol=0.1)
    np.testing.assert_allclose(r["mean_predictor_mae"], np.array([1, 3]) * math.sqrt(2 / math.pi), rtol=0.15)


def test_per_class_accuracy_hand():
    cls, acc = per_class_accuracy([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 0, 2])
    np.testing.assert_array_equal(cls, [0, 1, 2])
    np.testing.assert_allclose(acc, [2 / 3, 1 / 2, 1.0])


def test_classification_probe(codes):
    g, ztr, zte = codes
    ytr, yte = g.integers(0, 3, 400), g.integers(0, 3, 300)
    centres = 4 * np.eye(3, 6)
    c = linear_probe_classification(ztr * 0.3 + centres[ytr], ytr, ztr[:300] * 0.3 + centres[yte], yte)
    assert c["accuracy"] == 1.0 and c["mean_per_class_accuracy"] == 1.0
    np.testing.assert_array_equal(c["classes"], [0, 1, 2])
    c = linear_probe_classification(ztr, ytr, zte, yte)
    assert abs(c["mean_per_class_accuracy"] - 1 / 3) < 0.1
    assert c["mean_per_class_accuracy"] == pytest.approx(c["per_class_accuracy"].mean())


def test_probe_bad_inputs(codes):
    g, ztr, zte = codes
    y = g.integers(0, 3, 400)
    with pytest.raises(InputError, match="mismatched"): linear_probe_regression(ztr, ztr[:-1, :2], zte, zte[:, :2])
    with pytest.raises(InputError, match="dimensions"): linear_probe_regression(ztr, ztr[:, :2], zte[:, :4], zte[:, :2])
    with pytest.raises(InputError, match="NaN"): linear_probe_regression(ztr, np.full(400, np.nan), zte, zte[:, 0])
    with pytest.raises(InputError, match="integer"): linear_probe_classification(ztr, y + 0.5, zte, y[:300])
    with pytest.raises(InputError, match="2 classes"): linear_probe_classification(ztr, 0 * y, zte, y[:300])


# ---- group accuracy ---------------------------------------------------------------------------------

def test_group_accuracy_hand():
    r = group_accuracy([0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1])
    assert r["average"] == pytest.approx(4 / 6) and r["worst"] == pytest.approx(0.5)
    assert r["per_group"] == {0: 0.75, 1: 0.5} and r["group_sizes"] == {0: 4, 1: 2}
    assert r["worst"] <= r["average"]
    y, a = np.array([0, 0, 1, 1, 1, 0]), np.array([5, 7, 5, 5, 7, 7])
    r = group_accuracy(torch.tensor(y), [0, 1, 1, 1, 0, 0], np.stack([y, a], 1))
    assert r["per_group"] == {(0, 5): 1.0, (0, 7): 0.5, (1, 5): 1.0, (1, 7): 0.0} and r["worst"] == 0.0


def test_group_accuracy_bad_inputs():
    with pytest.raises(InputError, match="mismatched"): group_accuracy([0, 1], [0, 1], [0, 1, 1])
    with pytest.raises(InputError, match="integer"): group_accuracy([0, 1], [0, 1], [0.5, 1])


# ---- reconstruction error ---------------------------------------------------------------------------

def test_reconstruction_error_golden():
    x = torch.rand(10, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert reconstruction_error_per_pixel(x, x) == 0.0
    zeros, ones = torch.zeros(4, 1, 5, 5), torch.ones(4, 1, 5, 5)
    assert reconstruction_error_per_pixel(zeros, ones, "mse") == 1.0
    assert reconstruction_error_per_pixel(zeros.numpy(), ones.numpy(), "l1") == 1.0
    u8 = (x * 255).round().to(torch.uint8)
    assert reconstruction_error_per_pixel(u8, u8.float() / 255) == pytest.approx(0.0, abs=1e-12)
    assert reconstruction_error_per_pixel((x > 0.5).float(), (x > 0.5).float(), "bce") == 0.0
    y = x.flip(0)
    assert reconstruction_error_per_pixel(x, y) == pytest.approx(F.mse_loss(x, y).item(), rel=1e-5)
    for cs in (1, 3, 100):
        assert reconstruction_error_per_pixel(x, y, "bce", chunk_size=cs) == pytest.approx(
            F.binary_cross_entropy(y.double(), x.double()).item(), rel=1e-9)


def test_reconstruction_error_bad_inputs():
    x = torch.rand(3, 1, 4, 4)
    with pytest.raises(InputError, match="shape"): reconstruction_error_per_pixel(x, x[:2])
    with pytest.raises(InputError, match=r"\[0, 1\]"): reconstruction_error_per_pixel(x, x * 3)
    with pytest.raises(InputError, match="NaN"): reconstruction_error_per_pixel(x, x * float("nan"))
    with pytest.raises(InputError, match="kind"): reconstruction_error_per_pixel(x, x, "l2")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_tensors_in():
    x, y = blobs(200)
    xc, yc = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")
    assert clustering_scores(xc, yc, tsne=False) == clustering_scores(x, y, tsne=False)
    assert w2_empirical(xc, xc + 1.0) == pytest.approx(8.0)
    r = linear_probe_regression(xc, xc[:, :2], xc, xc[:, :2])
    assert r["mean_mae"] < 1e-6
    assert group_accuracy(yc, yc, yc)["worst"] == 1.0
    img = torch.rand(5, 3, 8, 8, device="cuda")
    assert reconstruction_error_per_pixel(img, img.cpu()) == 0.0


def test_w2_solver_not_converged():
    from disentbook.eval.protocols import TransportError
    g = np.random.default_rng(0)
    with pytest.raises(TransportError, match="stopped early"): w2_plan(g.normal(size=(50, 2)), g.normal(size=(50, 2)), num_iter_max=3)
