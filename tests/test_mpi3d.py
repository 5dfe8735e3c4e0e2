"""MPI3D loader on tiny fake files in a tmp data dir (never a download): the official grid, memory mapping of a stored
npz, the unpacked copy of a compressed one, index <-> factors <-> images, subsets, and every bad file refused clearly."""
import math

import numpy as np
import pytest
import torch

from disentbook.core import InputError, DataNotFoundError, CorruptFileError
from disentbook.data.mpi3d import MPI3D, MPI3D_SIZES, MPI3D_FACTORS, mpi3d_path, open_images, unpacked_path
from disentbook.data.colored_mnist import PairSampler, class_labels, group_ids

TINY = (3, 3, 2, 2, 2, 2, 3)


class Tiny(MPI3D):
    full_sizes = TINY


def fake(sizes=TINY):
    n = math.prod(sizes); x = np.zeros((n, 64, 64, 3), np.uint8)
    x[:, 0, 0, 0], x[:, 0, 0, 1], x[:, 63, 63, 2] = np.arange(n) % 256, np.arange(n) // 256, 7
    return x


def ids(x):
    return x[:, 0, 0, 0].long() + 256 * x[:, 1, 0, 0].long()


@pytest.fixture
def root(tmp_path):
    p = mpi3d_path("toy", tmp_path); p.parent.mkdir(parents=True)
    np.savez(p, images=fake())
    return tmp_path


def test_official_grid_and_paths(tmp_path):
    assert MPI3D_SIZES == (6, 6, 2, 3, 3, 40, 40) and math.prod(MPI3D_SIZES) == 1_036_800
    assert MPI3D_FACTORS == ("object_color", "object_shape", "object_size", "camera_height", "background_color",
                             "horizontal_axis", "vertical_axis")
    assert mpi3d_path("real", tmp_path) == tmp_path / "mpi3d" / "mpi3d_real.npz"
    with pytest.raises(InputError, match="variant"): mpi3d_path("sim", tmp_path)
    with pytest.raises(DataNotFoundError, match="mpi3d_real.npz"): MPI3D("real", root=tmp_path)


def test_memmap_index_and_images(root):
    d = Tiny("toy", root=root, verify=False)
    assert isinstance(d._array(), np.memmap) and d.factor_sizes == TINY and len(d) == math.prod(TINY)
    idx = torch.tensor([0, 431, 5, 300, 5])
    f = d.index_to_factors(idx)
    assert torch.equal(d.factors_to_index(f), idx)
    x = d.sample_observations_from_factors(f)
    assert x.shape == (5, 3, 64, 64) and x.dtype == torch.uint8
    assert torch.equal(ids(x), idx) and (x[:, 2, 63, 63] == 7).all()          # channels: HWC file -> CHW tensor
    assert d.class_factor == "object_shape" and d.class_factor not in d.known_nuisance
    assert d.value_name("object_shape", 1) == "cube" and d.value_name("horizontal_axis", 1) == "1"


def test_subset_shares_the_file(root):
    d = Tiny("toy", root=root, verify=False)
    s = d.subset(object_color=[1, 2], object_shape=range(1, 3))
    assert s.factor_sizes == (2, 2, 2, 2, 2, 2, 3) and s._array() is d._array()
    f = s.index_to_factors(torch.arange(len(s)))
    full = f.clone(); full[:, 0] += 1; full[:, 1] += 1
    assert torch.equal(ids(s.images), d.factors_to_index(full))
    with pytest.raises(InputError, match="indices must lie"): d.subset(object_color=[3])
    # the invariance pair sampler works unchanged: same class, exactly k known nuisances changed
    b = PairSampler(s, k=2).sample(16, torch.Generator().manual_seed(0))
    assert torch.equal(b["factors"][:, 1], b["factors2"][:, 1])
    changed = (b["factors"] != b["factors2"]).sum(1)
    assert (changed == 2).all() and torch.equal(class_labels(s, b["factors"]), b["labels"])
    assert group_ids(s, b["factors"]).shape == (16, 2)


def test_compressed_file_is_unpacked_once(tmp_path):
    p = mpi3d_path("real", tmp_path); p.parent.mkdir(parents=True)
    np.savez_compressed(p, images=fake().reshape(*TINY, 64, 64, 3))         # the README's grid layout reads too
    with pytest.raises(DataNotFoundError, match="no unpacked copy"): Tiny("real", root=tmp_path, verify=False, unpack=False)
    d = Tiny("real", root=tmp_path, verify=False)
    assert unpacked_path(p).is_file() and torch.equal(ids(d.sample_observations_from_factors(d.index_to_factors(torch.arange(9)))), torch.arange(9))
    stamp = unpacked_path(p).stat().st_mtime_ns
    Tiny("real", root=tmp_path, verify=False)
    assert unpacked_path(p).stat().st_mtime_ns == stamp


def test_bad_files_are_refused(tmp_path, root):
    with pytest.raises(CorruptFileError, match="wrong md5"): Tiny("toy", root=root)             # verify=True: the registry's md5
    with pytest.raises(CorruptFileError, match=r"expected \(1036800, 64, 64, 3\)"): MPI3D("toy", root=root, verify=False)
    p = tmp_path / "x.npz"
    np.savez(p, images=fake()[:, :32]);            pytest.raises(CorruptFileError, open_images, p, TINY)
    np.savez(p, images=fake().astype(np.int16));   pytest.raises(CorruptFileError, open_images, p, TINY)
    np.savez(p, labels=np.zeros(3));               pytest.raises(CorruptFileError, open_images, p, TINY)
    np.savez(p, images=fake()); raw = p.read_bytes()
    p.write_bytes(raw[:len(raw) - 40_000]);       pytest.raises(CorruptFileError, open_images, p, TINY)
    p.write_bytes(b"not a zip at all");            pytest.raises(CorruptFileError, open_images, p, TINY)
