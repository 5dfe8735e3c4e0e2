"""disentbook.data.digits: the embedded 10,000 MNIST digits (sha256 check, fixed stratified split) and the full-MNIST path."""
import os, shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.core import CorruptFileError, DataNotFoundError, InputError
from disentbook.data import digits
from disentbook.data.digits import (EMBEDDED_COUNTS, EMBEDDED_SOURCE, MNIST_FILES, digits_source, embedded_digits, read_idx,
                                    load_digits, split_indices)
from disentbook.core import sha256_file

TRAIN_COUNTS = [851, 977, 841, 882, 830, 713, 864, 920, 794, 828]


@pytest.fixture
def datadir(tmp_path, monkeypatch):
    "An empty data directory: no MNIST in it."
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def mnist_fixture(datadir, trust_mnist_files):
    """A tiny MNIST in torchvision's layout (MNIST/raw/, extracted IDX files): 4 train and 3 test images, checked by
    their own sizes and sha256 (the real files' would refuse them)."""
    raw = datadir / "MNIST" / "raw"; raw.mkdir(parents=True)
    head = lambda *dims: bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    for split, (im, lb), labels in [("train", MNIST_FILES["train"], [5, 0, 4, 1]), ("test", MNIST_FILES["test"], [7, 2, 1])]:
        n = len(labels)
        imgs = (np.arange(n * 784) % 251).astype(np.uint8)
        (raw / im).write_bytes(head(n, 28, 28) + imgs.tobytes())
        (raw / lb).write_bytes(head(n) + bytes(labels))
    trust_mnist_files(raw)
    return datadir


def _copy_asset(tmp_path) -> Path:
    dst = tmp_path / "assets" / digits.EMBEDDED_DIGITS.name; dst.parent.mkdir()
    shutil.copy(digits.EMBEDDED_DIGITS, dst); shutil.copy(digits.EMBEDDED_DIGITS.with_suffix(".md"), dst.with_suffix(".md"))
    return dst


# ---- the embedded file -------------------------------------------------------------------------------

def test_embedded_exact_values():
    x, y = embedded_digits()
    assert x.shape == (10_000, 28, 28) and x.dtype == np.uint8 and y.dtype == np.int64
    assert np.bincount(y).tolist() == list(EMBEDDED_COUNTS)
    assert y[[0, 1000, 1001, 9999]].tolist() == [0, 0, 1, 9]
    assert x[0, 10, 12] == 252 and x[0, 14, 14] == 0 and x[5000, 14, 14] == 18 and x[9999, 14, 14] == 254
    assert x[1001, 10:18, 14].tolist() == [0, 20, 205, 251, 251, 253, 251, 172]
    assert not x.flags.writeable, "the cached arrays are shared: read-only"


def test_corrupt_copy_is_a_clear_error(tmp_path, monkeypatch):
    bad = _copy_asset(tmp_path)
    raw = bytearray(bad.read_bytes()); raw[len(raw) // 2] ^= 0x01; bad.write_bytes(bytes(raw))
    monkeypatch.setattr(digits, "EMBEDDED_DIGITS", bad)
    with pytest.raises(CorruptFileError, match=r"sha256 [0-9a-f]{64} differs from [0-9a-f]{64} recorded in mnist_digits_10k\.md"):
        load_digits("embedded")
    with pytest.raises(CorruptFileError, match="build_digits"): embedded_digits()


def test_card_problems_and_missing_file(tmp_path, monkeypatch):
    p = _copy_asset(tmp_path)
    monkeypatch.setattr(digits, "EMBEDDED_DIGITS", p)
    assert embedded_digits()[0].shape == (10_000, 28, 28), "an intact copy loads"
    card = p.with_suffix(".md")
    card.write_text("# a card without checksums\n"); digits._checked_embedded.cache_clear()
    with pytest.raises(CorruptFileError, match="expected a line"): embedded_digits()
    card.unlink()
    with pytest.raises(CorruptFileError, match="card .* is missing|dataset card"): embedded_digits()
    monkeypatch.setattr(digits, "EMBEDDED_DIGITS", tmp_path / "nowhere.npz")
    with pytest.raises(DataNotFoundError, match="nowhere.npz"): embedded_digits()


def test_sha256_checked_once(tmp_path, monkeypatch):
    p = _copy_asset(tmp_path)
    monkeypatch.setattr(digits, "EMBEDDED_DIGITS", p)
    calls = []
    real = sha256_file
    monkeypatch.setattr(digits, "sha256_file", lambda f: calls.append(f) or real(f))
    digits._checked_embedded.cache_clear()
    for _ in range(3): embedded_digits()
    assert len(calls) == 1
    raw = bytearray(p.read_bytes()); raw[100] ^= 0x01; p.write_bytes(bytes(raw))    # a changed file is checked again
    os.utime(p, ns=(1, 1))                                                          # a new mtime even on coarse clocks
    with pytest.raises(CorruptFileError): embedded_digits()


# ---- the split -------------------------------------------------------------------------------------

def test_split_disjoint_stratified_documented_counts():
    x, y = embedded_digits()
    sp = split_indices(x, y)
    tr, te = sp["train"], sp["test"]
    assert len(tr) == 8_500 and len(te) == 1_500
    assert not set(tr.tolist()) & set(te.tolist()) and sorted(tr.tolist() + te.tolist()) == list(range(10_000))
    assert np.bincount(y[te]).tolist() == [150] * 10 and np.bincount(y[tr]).tolist() == TRAIN_COUNTS
    assert not {im.tobytes() for im in x[tr]} & {im.tobytes() for im in x[te]}, "no test digit is also a train digit"


def test_split_is_fixed():
    x, y = embedded_digits()
    sp = split_indices(x, y)
    assert sp["train"][:5].tolist() == [5724, 3010, 1964, 144, 2210]       # golden: changes only if the rule does
    assert sp["test"][:5].tolist() == [3637, 5507, 7316, 2566, 7647]
    perm = np.random.default_rng(1).permutation(len(y))
    again = split_indices(x[perm], y[perm])
    assert perm[again["test"]].tolist() == sp["test"].tolist(), "independent of the file's order"
    with pytest.raises(InputError, match="need more than"): split_indices(x[:100], y[:100])


def test_load_digits_embedded(datadir):
    tr, te = load_digits(), load_digits(split="test")
    assert tr.source.startswith(EMBEDDED_SOURCE) and "train split" in tr.source
    assert tr.images.shape == (8_500, 1, 28, 28) and tr.images.dtype == torch.uint8 and tr.labels.dtype == torch.int64
    assert te.images.shape == (1_500, 1, 28, 28) and torch.bincount(te.labels).tolist() == [150] * 10
    assert torch.bincount(tr.labels).tolist() == TRAIN_COUNTS
    assert load_digits(n=5).labels.tolist() == [5, 2, 1, 0, 2]
    assert load_digits(split="test", n=3).labels.tolist() == [3, 5, 7]
    x, _ = embedded_digits()
    assert torch.equal(load_digits(n=2).images[:, 0], torch.from_numpy(x[[5724, 3010]]))
    s = load_digits(seed=4, n=100)
    assert torch.equal(s.images, load_digits(seed=4, n=100).images) and "seed 4" in s.source
    assert not torch.equal(s.labels, load_digits(seed=5, n=100).labels)
    a = load_digits(n=3); a.images += 1
    assert not torch.equal(a.images, load_digits(n=3).images), "every call returns fresh tensors"


def test_load_digits_bad_input(datadir):
    for bad in ("synthetic", "emnist"):
        with pytest.raises(InputError, match="'auto', 'mnist', 'embedded'"): load_digits(bad)
    with pytest.raises(InputError, match="'train' or 'test'"): load_digits(split="valid")
    with pytest.raises(InputError, match="positive"): load_digits(n=0)
    with pytest.raises(DataNotFoundError, match="MNIST"): load_digits("mnist")


# ---- source choice and the full-MNIST path ---------------------------------------------------------

def test_auto_without_data_dir_is_embedded(datadir):
    assert load_digits(n=4).source.startswith(EMBEDDED_SOURCE)
    line = digits_source()
    assert line.startswith(EMBEDDED_SOURCE) and str(datadir / "MNIST" / "raw") in line


def test_auto_with_mnist_fixture_is_full_mnist(mnist_fixture):
    tr, te = load_digits(), load_digits(split="test")
    assert tr.source.startswith("MNIST train") and te.source.startswith("MNIST test")
    assert tr.labels.tolist() == [5, 0, 4, 1] and te.labels.tolist() == [7, 2, 1]
    assert tr.images.shape == (4, 1, 28, 28) and tr.images[1, 0, 0, :3].tolist() == [(784 + k) % 251 for k in range(3)]
    assert load_digits("mnist", n=2).labels.tolist() == [5, 0]
    assert sorted(load_digits(seed=0).labels.tolist()) == [0, 1, 4, 5]
    assert digits_source().startswith("MNIST") and str(mnist_fixture / "MNIST" / "raw") in digits_source()
    assert load_digits("embedded", n=3).source.startswith(EMBEDDED_SOURCE), "embedded on request"
    bad = mnist_fixture / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    bad.write_bytes(bytes([0, 0, 8, 1]) + (9).to_bytes(4, "big") + bytes(3))
    with pytest.raises(CorruptFileError, match="wrong sha256"): load_digits(split="test")   # checked before it is read
    with pytest.raises(CorruptFileError, match="header says"): read_idx(bad)
