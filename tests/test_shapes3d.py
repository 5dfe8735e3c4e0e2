"""Procedural 3dShapes: the official grid, determinism per factor index, subsets, bad input, the official-file path."""
import colorsys

import pytest
import torch

from disentbook.core import InputError, DataNotFoundError
from disentbook.data.shapes3d import Shapes3D, render_shapes3d, hue_to_rgb, SHAPES3D_VALUES


def test_grid_is_official():
    d = Shapes3D(source="procedural")
    assert d.factor_sizes == (10, 10, 10, 8, 4, 15) and len(d) == 480_000
    assert d.factor_names == ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
    assert d.factor_values("orientation").tolist()[0] == -30 and d.factor_values("scale").tolist()[-1] == 1.25
    assert d.class_factor == "shape" and "shape" not in d.known_nuisance


def test_deterministic_per_index():
    d = Shapes3D(source="procedural")
    idx = torch.tensor([0, 1, 479_999, 123_456, 77_777])
    a = d.sample_observations_from_factors(d.index_to_factors(idx))
    b = Shapes3D(source="procedural").sample_observations_from_factors(d.index_to_factors(idx.flip(0)))
    assert torch.equal(a, b.flip(0)) and a.shape == (5, 3, 64, 64) and a.dtype == torch.uint8
    f = d.index_to_factors(idx)
    vals = [d.factor_values(k)[f[:, k]] for k in range(6)]
    assert torch.equal(a, render_shapes3d(*vals[:4], vals[4].long(), vals[5]))      # table path == value path


def test_colours_follow_hues():
    d = Shapes3D(source="procedural")
    x = d.sample_observations_from_factors(torch.tensor([[0, 3, 6, 4, 2, 7]]))[0].float() / 255
    hue = lambda p: colorsys.rgb_to_hsv(*p.tolist())[0]
    assert abs(hue(x[:, 50, 32]) - 0.6) < 0.02 and abs(hue(x[:, 5, 5]) - 0.3) < 0.02 and abs(hue(x[:, 62, 2])) < 0.02
    assert torch.allclose(hue_to_rgb(torch.tensor([0.0, 1 / 3])), torch.tensor([[1.0, 0, 0], [0, 1, 0]]))


def test_subset_and_bad_input(tmp_path):
    d = Shapes3D(source="procedural")
    s = d.subset(object_hue=range(5))
    assert len(s) == 240_000 and float(s.factor_values("object_hue").max()) == pytest.approx(0.4)
    with pytest.raises(InputError, match="source"): Shapes3D(source="nope")
    with pytest.raises(InputError, match="indices must lie"): d.subset(scale=[8])
    with pytest.raises(InputError, match="selects no values"): d.subset(scale=[])
    with pytest.raises(InputError, match="orientation"): d.sample_observations_from_factors(torch.tensor([[0, 0, 0, 0, 0, 15]]))
    with pytest.raises(InputError, match="integer"): d.sample_observations_from_factors(torch.zeros(1, 6))
    with pytest.raises(DataNotFoundError, match="3dshapes.h5"): Shapes3D(source="official", root=tmp_path)
    assert Shapes3D(root=tmp_path).source == "procedural"
