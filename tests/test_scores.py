"""Golden tests of the sampled disentanglement scores (BetaVAE, FactorVAE) and `evaluate`, at small sizes."""
import math

import numpy as np
import pytest
import torch

from disentbook.core import InputError
from disentbook.eval.scores import (METRICS, SYNTHETIC_KINDS, SyntheticFactors, beta_vae_features, beta_vae_score, check_metric_names, codes_from_factors, evaluate, factor_vae_details, factor_vae_score, sample_factor_array, synthetic_representation)

SIZES = (3, 6, 10, 8)
K = len(SIZES)
BETA = dict(num_train=300, num_eval=200, batch_size=16)
FACTOR = dict(num_train=300, num_eval=200, batch_size=16, num_variance_estimate=1000)


@pytest.fixture(scope="module")
def data():
    return SyntheticFactors(SIZES)


def rep(kind, seed=0):
    return synthetic_representation(kind, K, seed=seed)


# --- the synthetic ground truth ---------------------------------------------------------------------------

def test_synthetic_data_contract(data):
    f = data.sample_factors(7, np.random.default_rng(0))
    x = data.sample_observations_from_factors(f, np.random.default_rng(0))
    assert x.shape == (7, K) and x.dtype == torch.float32
    assert torch.allclose(x, f.float() / torch.tensor([s - 1 for s in SIZES], dtype=torch.float32))
    assert torch.equal(data.index_to_factors(data.factors_to_index(f)), f)
    assert torch.allclose(data.images[data.factors_to_index(f)], x)
    for kind in SYNTHETIC_KINDS:
        r = rep(kind)
        assert r(x).shape == (7, r.num_codes)


def test_synthetic_noise_uses_rng():
    d = SyntheticFactors((3, 4), noise=0.3)
    f = d.sample_factors(50, np.random.default_rng(0))
    a = d.sample_observations_from_factors(f, np.random.default_rng(1))
    b = d.sample_observations_from_factors(f, np.random.default_rng(1))
    c = d.sample_observations_from_factors(f, np.random.default_rng(2))
    assert torch.equal(a, b) and not torch.equal(a, c)


# --- BetaVAE ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["identity", "rescaled", "padded"])
def test_beta_vae_perfect(data, kind):
    assert beta_vae_score(data, rep(kind), 0, **BETA) == (1.0, 1.0)


def test_beta_vae_noise_is_chance(data):
    _, ev = beta_vae_score(data, rep("noise"), 0, **BETA)
    assert abs(ev - 1 / K) < 0.1


def test_beta_vae_seeded(data):
    r = rep("noisy")
    a = beta_vae_score(data, rep("rotated"), 4, **BETA)
    assert a == beta_vae_score(data, rep("rotated"), 4, **BETA)
    feats = [beta_vae_features(data, r, 30, 8, seed=s)[1] for s in (1, 2)]
    assert not np.array_equal(*feats)


def test_beta_vae_features_chunking(data):
    r = rep("rescaled")
    a, la = beta_vae_features(data, r, 20, 8, seed=0, chunk=1000)
    b, lb = beta_vae_features(data, r, 20, 8, seed=0, chunk=3)
    assert np.array_equal(la, lb) and np.allclose(a, b)
    assert (a[np.arange(20), np.argsort(np.random.default_rng(0).permutation(K))[la]] == 0).all()


# --- FactorVAE ----------------------------------------------------------------------------------------------

def test_factor_vae_perfect(data):
    r = factor_vae_details(data, rep("identity"), 0, **FACTOR)
    assert (r.train_accuracy, r.eval_accuracy, r.num_active) == (1.0, 1.0, K)
    assert np.array_equal(r.train_votes, np.diag(r.train_votes.diagonal()))


def test_factor_vae_rescaled_unchanged(data):
    a = factor_vae_details(data, rep("identity"), 3, **FACTOR)
    b = factor_vae_details(data, rep("rescaled"), 3, **FACTOR)
    assert (a.train_accuracy, a.eval_accuracy) == (b.train_accuracy, b.eval_accuracy)
    perm = np.random.default_rng(0).permutation(K)
    assert np.array_equal(b.train_votes[:, np.argsort(perm)], a.train_votes)
    # an imperfect code keeps its exact score under permutation and rescaling too
    noisy = SyntheticFactors(SIZES, noise=0.2)
    assert factor_vae_score(noisy, rep("identity"), 5, **FACTOR) == factor_vae_score(noisy, rep("rescaled"), 5, **FACTOR)


def test_factor_vae_constant_and_pruning(data):
    assert factor_vae_score(data, rep("constant"), 0, **FACTOR) == (0.0, 0.0)
    r = factor_vae_details(data, rep("constant"), 0, **FACTOR)
    assert r.num_active == 0 and r.train_votes.sum() == 0
    p = factor_vae_details(data, rep("padded"), 0, **FACTOR)
    assert p.train_accuracy == 1.0 and p.active.tolist() == [True] * K + [False, False]


def test_factor_vae_noise_and_merged(data):
    _, ev = factor_vae_score(data, rep("noise"), 0, **FACTOR)
    assert abs(ev - 1 / K) < 0.12
    m = factor_vae_details(data, rep("merged"), 0, **FACTOR)
    assert 0.6 < m.eval_accuracy < 0.9          # one of the two merged factors loses its votes


def test_factor_vae_seeds(data):
    r = rep("rotated")
    assert factor_vae_score(data, r, 1, **FACTOR) == factor_vae_score(data, r, 1, **FACTOR)
    a = factor_vae_details(data, r, 1, **FACTOR).train_votes
    b = factor_vae_details(data, r, 2, **FACTOR).train_votes
    assert not np.array_equal(a, b)


def test_generic_data_object():
    class Minimal:                       # disentanglement_lib style: numpy in, numpy out, no factor_sizes
        num_factors = 3
        def sample_factors(self, n, rng): return rng.integers(0, 5, size=(n, 3))
        def sample_observations_from_factors(self, f, rng): return f / 4.0
    kw = dict(num_train=50, num_eval=50, batch_size=8)
    assert factor_vae_score(Minimal(), lambda x: torch.as_tensor(x), 0, num_variance_estimate=200, **kw) == (1.0, 1.0)
    assert beta_vae_score(Minimal(), lambda x: x, 0, **kw) == (1.0, 1.0)


def test_constant_factor_never_chosen():
    d = SyntheticFactors((1, 4, 5))
    r = factor_vae_details(d, synthetic_representation("identity", 3), 0, **FACTOR)
    assert r.train_votes[0].sum() == 0 and r.train_accuracy == 1.0


# --- bad inputs ---------------------------------------------------------------------------------------------

def test_bad_represent(data):
    ident = rep("identity")
    kw = dict(num_train=5, num_eval=5, batch_size=4, chunk=8)
    with pytest.raises(InputError, match=r"expected codes of shape \(8, L\)"):
        beta_vae_score(data, lambda x: ident(x)[:-1], 0, **kw)
    with pytest.raises(InputError, match=r"x\[:, None\]"):
        beta_vae_score(data, lambda x: ident(x)[:, 0], 0, **kw)
    with pytest.raises(InputError, match="NaN"):
        factor_vae_score(data, lambda x: np.full((len(x), 3), np.nan), 0, **kw)
    with pytest.raises(InputError, match="NaN"):
        beta_vae_score(data, lambda x: torch.full((len(x), 3), float("inf")), 0, **kw)


@pytest.mark.parametrize("kw,match", [(dict(num_train=0), "num_train"), (dict(num_eval=0), "num_eval"),
                                      (dict(batch_size=1), "batch_size"), (dict(num_variance_estimate=1), "num_variance"),
                                      (dict(num_train=2.5), "num_train")])
def test_bad_sizes(data, kw, match):
    with pytest.raises(InputError, match=match):
        factor_vae_score(data, rep("identity"), 0, **kw)


def test_bad_data():
    with pytest.raises(InputError, match="lacks num_factors"):
        beta_vae_score(np.zeros((10, 3)), lambda x: x, 0)
    with pytest.raises(InputError, match="single value"):
        factor_vae_score(SyntheticFactors((1, 1)), lambda x: x, 0)


# --- evaluate -----------------------------------------------------------------------------------------------

class Counting:
    def __init__(self): self.seen, self.calls = 0, 0
    def __call__(self, x):
        self.seen += len(x); self.calls += 1
        return np.asarray(x, dtype=np.float64)


def test_codes_from_factors_uses_every_chunk(data):
    c = Counting()
    codes = codes_from_factors(data, c, sample_factor_array(data, 1001, np.random.default_rng(0), K), None, chunk=64)
    assert (len(codes), c.seen, c.calls) == (1001, 1001, math.ceil(1001 / 64))


def test_evaluate_sampled_scores_match_direct_calls(data):
    r = rep("rotated")
    df = evaluate(r, data, ("factor_vae", "beta_vae"), seed=3, num_points=200, num_test=100,
                  score_kwargs=dict(batch_size=8))
    fv = df.query("metric == 'factor_vae' and quantity == 'accuracy'").value.tolist()
    bv = df.query("metric == 'beta_vae'").value.tolist()
    assert fv == list(factor_vae_score(data, r, 3, num_train=200, num_eval=100, num_variance_estimate=200, batch_size=8))
    assert bv == list(beta_vae_score(data, r, 3, num_train=200, num_eval=100, batch_size=8))
    assert set(df.columns) >= {"metric", "quantity", "split", "value", "n"}


def test_evaluate_encodes_everything(data):
    c = Counting()
    evaluate(c, data, ("beta_vae",), num_points=50, num_test=30, batch_size=64, score_kwargs=dict(batch_size=4))
    assert c.seen == 2 * (50 + 30) * 4


def test_evaluate_unknown_metric(data):
    with pytest.raises(InputError, match="known: " + ", ".join(METRICS)):
        evaluate(rep("identity"), data, ("mig", "factorvae"))
    with pytest.raises(InputError, match="score_kwargs"):
        evaluate(rep("identity"), data, ("beta_vae",), score_kwargs=dict(batchsize=3))
    assert check_metric_names("mig") == ("mig",)


class TinyEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(K, K)
        with torch.no_grad(): self.lin.weight.copy_(torch.eye(K)); self.lin.bias.zero_()
    def encode(self, x): mu = self.lin(x); return mu, torch.zeros_like(mu)


def test_evaluate_module_mean_and_sample(data):
    enc = TinyEncoder().train()
    kw = dict(num_points=200, num_test=100, score_kwargs=dict(batch_size=8))
    mean = evaluate(enc, data, ("factor_vae",), **kw)
    assert enc.training
    assert mean.value.tolist()[:2] == [1.0, 1.0]
    s1 = evaluate(enc, data, ("factor_vae",), sample=True, seed=1, **kw)
    assert s1.value.tolist() == evaluate(enc, data, ("factor_vae",), sample=True, seed=1, **kw).value.tolist()
    assert s1.value.iloc[0] < 1.0
    with pytest.raises(InputError, match="sample=True needs"):
        evaluate(lambda x: x, data, ("beta_vae",), sample=True, **kw)


def test_evaluate_vae_on_dsprites():
    from disentbook.data.dsprites import DSprites
    from disentbook.nets import VAE
    shapes = DSprites().subset(scale=[0, 5], orientation=[0], posX=range(0, 32, 8), posY=range(0, 32, 8))
    torch.manual_seed(0)
    vae = VAE(image_size=64, latent_dim=4)
    df = evaluate(vae, shapes, ("factor_vae", "beta_vae"), num_points=20, num_test=10, batch_size=64,
                  score_kwargs=dict(batch_size=4))
    assert len(df) == 5 and df.value.between(0, 4).all()


def test_evaluate_array_metrics(data):
    pytest.importorskip("disentbook.eval.metrics")
    import disentbook.eval.metrics as M
    missing = [m for m in ("mig", "sap", "dci", "modularity", "irs") if not hasattr(M, m)]
    if missing: pytest.skip(f"disentbook.eval.metrics lacks {missing}")
    df = evaluate(rep("identity"), data, ("mig", "sap", "dci", "modularity", "irs"), num_points=500, num_test=300)
    enc = df.query("metric == 'encode'")
    assert enc.n.item() == 800 and enc.value.item() == K
    assert (df.query("metric == 'mig'").n == 500).all()
    assert df.query("metric == 'mig'").value.iloc[0] > 0.5
