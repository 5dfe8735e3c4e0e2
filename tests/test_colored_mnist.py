"""Colored-MNIST / Rotation-Colored-MNIST on the embedded real digits, and the pair sampler (k changed factors, class kept)."""
import pytest
import torch

from disentbook.core import InputError, make_generator
from disentbook.data.colored_mnist import (ColoredMNIST, PairSampler, BACKGROUNDS_TEST, BACKGROUNDS_TRAIN,
                                           class_labels, group_ids, rotate_digits)
from disentbook.data.shapes3d import Shapes3D


@pytest.fixture(scope="module")
def train(): return ColoredMNIST("train", "embedded")


def test_grid_and_colour_shift(train):
    test = ColoredMNIST("test", "embedded")
    assert train.factor_sizes == (10, 690, 6, 3) and test.factor_sizes == (10, 173, 6, 3)
    for d, pal in ((train, BACKGROUNDS_TRAIN), (test, BACKGROUNDS_TEST)):
        x, f = d.sample(32, 0)
        corner = x[:, :, 0, 0].float() / 255
        assert torch.allclose(corner, torch.tensor(list(pal.values()))[f[:, 3]], atol=3e-3)
    assert not set(BACKGROUNDS_TRAIN.values()) & set(BACKGROUNDS_TEST.values())
    _, f = test.sample(8, 1)
    assert torch.equal(class_labels(test, f), f[:, 0]) and torch.equal(group_ids(test, f), f[:, [0, 3]])


def test_rotation_and_determinism(train):
    r = ColoredMNIST("test", "embedded", rotation=True, angles=(-75, 65))
    assert r.factor_sizes[-1] == 2 and r.factor_values("angle").tolist() == [-75.0, 65.0]
    f = r.sample_factors(20, 3)
    assert torch.equal(r.sample_observations_from_factors(f), r.sample_observations_from_factors(f.flip(0)).flip(0))
    yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    g = torch.exp(-((xx - 18) ** 2 + (yy - 13.5) ** 2) / 8)[None]       # a smooth blob right of the centre
    back = rotate_digits(rotate_digits(g, torch.tensor([30.0])), torch.tensor([-30.0]))
    assert (back - g).abs().max() < 0.1                                  # rotations compose (bilinear blur aside)
    up = rotate_digits(g, torch.tensor([90.0]))[0]
    assert up.argmax() // 28 <= 10 and abs(int(up.argmax() % 28) - 13.5) <= 1   # +90 degrees: counter-clockwise, to the top
    with pytest.raises(InputError, match="rotation=True"): ColoredMNIST(angles=(5,))
    with pytest.raises(InputError, match="split"): ColoredMNIST("val")


@pytest.mark.parametrize("k", [1, 2, (1, 2)])
def test_pairs_change_exactly_k_and_keep_class(train, k):
    b = PairSampler(train, k=k).sample(256, make_generator(0))
    diff = b["factors"] != b["factors2"]
    assert torch.equal(diff.sum(1), b["k"]) and not diff[:, :2].any()
    assert torch.equal(b["labels"], b["factors"][:, 0]) and torch.equal(b["labels"], b["factors2"][:, 0])
    assert b["x"].shape == b["x2"].shape == (256, 3, 28, 28) and b["x"].dtype == torch.float32
    assert torch.equal(b["s"], b["factors"][:, 2:]) and torch.equal(b["s2"], b["factors2"][:, 2:])


def test_pairs_on_3dshapes_with_difficulty_warmup():
    p = PairSampler(Shapes3D("procedural").subset(object_hue=range(5)), k="random", warmup_steps=4)
    assert [p.k_max(t) for t in range(6)] == [1, 2, 3, 4, 5, 5]
    for step in (0, 2, 9):
        p.step = step
        b = p.sample(128, make_generator(step))
        assert (b["k"] <= p.k_max(step)).all()
        assert torch.equal((b["factors"] != b["factors2"]).sum(1), b["k"])
        assert torch.equal(b["factors"][:, 4], b["factors2"][:, 4])    # shape (the class) kept


def test_pair_sampler_bad_input(train):
    with pytest.raises(InputError, match=r"k: expected ints in \[1, 2\]"): PairSampler(train, k=0)
    with pytest.raises(InputError, match="other than the class"): PairSampler(train, nuisance=("digit",))
    with pytest.raises(InputError, match="GroundTruthData"): PairSampler(torch.zeros(3))
    with pytest.raises(InputError, match="warmup_steps"): PairSampler(train, warmup_steps=-1)
    with pytest.raises(InputError, match="batch_size"): PairSampler(train).sample(-1, make_generator(0))
