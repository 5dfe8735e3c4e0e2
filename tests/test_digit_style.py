"""The MNIST digit-style set and the reference/unlabelled sampler: shapes, determinism, ground truth, bad input."""
import pytest
import torch

from disentbook.core import DataNotFoundError, InputError, make_generator
from disentbook.data.digit_style import (STYLE_NAMES, ReferenceSampler, StyleImages, affectnet_reference, apply_style,
                                         edge_digits, make_digit_style, sample_styles, style_vector)


@pytest.fixture(scope="module")
def ds():
    return make_digit_style("embedded", size=28, n_reference=40, n_unlabelled=20, n_probe=30, seed=3)


def test_sizes_types_and_reference_style(ds):
    assert (len(ds.reference), len(ds.unlabelled), len(ds.probe_train), len(ds.probe_test)) == (40, 40, 15, 15)
    for s in (ds.reference, ds.unlabelled, ds.probe_train, ds.probe_test):
        assert isinstance(s, StyleImages) and s.images.dtype == torch.uint8 and s.images.shape[1:] == (3, 28, 28)
        assert s.style.shape == (len(s), 5) and s.style_names == STYLE_NAMES
    assert torch.equal(ds.reference.style, torch.tensor([[1.0, 1, 1, 1, 0]]).expand(40, 5))
    assert torch.equal(ds.reference.images[:, 0], ds.reference.images[:, 1])
    assert ds.unlabelled.style.min() >= 0 and ds.unlabelled.style.max() <= 1


def test_deterministic_per_seed(ds):
    again = make_digit_style("embedded", size=28, n_reference=40, n_unlabelled=20, n_probe=30, seed=3)
    assert torch.equal(again.unlabelled.images, ds.unlabelled.images) and torch.equal(again.probe_test.style, ds.probe_test.style)
    other = make_digit_style("embedded", size=28, n_reference=40, n_unlabelled=20, n_probe=30, seed=4)
    assert not torch.equal(other.unlabelled.style, ds.unlabelled.style)


def test_style_is_in_the_pixels():
    e = edge_digits(torch.full((1, 28, 28), 0, dtype=torch.uint8).index_fill_(1, torch.arange(6, 22), 255), 28)
    red = apply_style(e, torch.tensor([1]), torch.tensor([[1.0, 0.0, 0.25]]), torch.tensor([1.0]))
    assert red[0, 1].sum() == 0 and torch.allclose(red[0, 2].sum(), 0.25 * red[0, 0].sum())
    thick = apply_style(e, torch.tensor([3]), torch.ones(1, 3), torch.tensor([1.0]))
    small = apply_style(e, torch.tensor([1]), torch.ones(1, 3), torch.tensor([0.5]))
    assert thick.sum() > red[0, 0].sum() and small.sum() < red[0, 0].sum()


def test_style_vector_normalisation():
    st = sample_styles(500, make_generator(0), max_width=3)
    v = style_vector(**st, max_width=3)
    assert set(st["width"].tolist()) == {1, 2, 3} and torch.allclose(st["color"].amax(1), torch.ones(500))
    assert set(v[:, 4].tolist()) == {0.0, 0.5, 1.0} and 0 <= v[:, 3].min() and v[:, 3].max() <= 1


def test_sampler(ds):
    s = ReferenceSampler(ds.reference, ds.unlabelled, device="cpu")
    b = s.sample(6, make_generator(0))
    assert sorted(b) == ["labels", "style", "x", "x_ref"]
    assert b["x"].shape == b["x_ref"].shape == (6, 3, 28, 28) and b["x"].dtype == torch.float32
    assert torch.equal(s.sample(6, make_generator(0))["x_ref"], b["x_ref"])
    with pytest.raises(InputError, match="batch_size"): s.sample(-1, make_generator(0))
    with pytest.raises(InputError, match="same shape"):
        ReferenceSampler(make_digit_style("embedded", 64, 4, 4, 4).reference, ds.unlabelled, device="cpu")


def test_bad_input(tmp_path):
    with pytest.raises(InputError, match="28 or 64"): make_digit_style("embedded", size=32)
    with pytest.raises(InputError, match="source"): make_digit_style("usps")
    with pytest.raises(InputError, match="n_probe"): make_digit_style("embedded", n_probe=1)
    with pytest.raises(InputError, match="grey"): edge_digits(torch.zeros(2, 3, 28, 28))
    with pytest.raises(InputError, match="scale"): apply_style(torch.zeros(1, 1, 8, 8), torch.tensor([1]), torch.ones(1, 3), torch.tensor([0.0]))
    with pytest.raises(InputError, match="style"): StyleImages(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), [0, 1], torch.zeros(2, 4), "x")
    with pytest.raises(DataNotFoundError): affectnet_reference(tmp_path)
