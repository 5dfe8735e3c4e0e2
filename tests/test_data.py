"Fast tests of disentbook.data and disentbook.registry: invariants and error paths (no network)."
import hashlib, os, warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.core import CorruptFileError, DataNotFoundError, InputError, make_generator
from disentbook.data import registry, dsprites as data, digits
from disentbook.data.dsprites import DSprites
from disentbook.data.base import LabelledImages
from disentbook.data.samplers import SingleSampler, TargetBackgroundSampler
from disentbook.data.digits import load_digits
from disentbook.data.registry import DATASETS, DatasetInfo, RemoteFile, prepare, require, verify


@pytest.fixture
def datadir(tmp_path, monkeypatch):
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("DISENTBOOK_OFFLINE", raising=False)
    return tmp_path / "data"


@pytest.fixture
def toy(tmp_path):
    "A fake registered dataset whose 'remote' files are local file:// URLs."
    src = tmp_path / "remote"; src.mkdir()
    (src / "a.bin").write_bytes(b"hello disentbook"); (src / "b.bin").write_bytes(b"x" * 100)
    files = (RemoteFile("a.bin", hashlib.sha256(b"hello disentbook").hexdigest(), 16, (src / "a.bin").as_uri()),
             RemoteFile("b.bin", None, 100, (src / "b.bin").as_uri()))
    registry.register_dataset(DatasetInfo("toy", files, "toy", "https://example.org", "", "fake", "none"))
    yield files
    DATASETS.pop("toy", None)


# ---- ground-truth data ----------------------------------------------------------------------------

def test_index_round_trip_full_grid():
    ds = DSprites("procedural")
    idx = torch.randint(len(ds), (5000,), generator=make_generator(0))
    f = ds.index_to_factors(idx)
    assert f.dtype == torch.int64 and f.shape == (5000, 6)
    assert torch.equal(ds.factors_to_index(f), idx)
    assert ds.index_to_factors([len(ds) - 1]).tolist() == [[0, 2, 5, 39, 31, 31]]
    assert ds.index_to_factors([1]).tolist() == [[0, 0, 0, 0, 0, 1]], "posY changes fastest"


@pytest.mark.parametrize("bad, msg", [(torch.tensor([[0, 3, 0, 0, 0, 0]]), "shape"),
                                      (torch.zeros(2, 5, dtype=torch.long), "expected shape (n, 6)"),
                                      (torch.zeros(1, 6), "integer")])
def test_bad_factors(bad, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        DSprites("procedural").factors_to_index(bad)


def test_bad_index():
    with pytest.raises(InputError, match="737280"): DSprites("procedural").index_to_factors([737_280])
    with pytest.raises(InputError, match="737280"): DSprites("procedural").index_to_factors([-1])


def test_subset_and_determinism():
    ds = DSprites("procedural")
    sub = ds.subset(shape=[2], scale=[1, 3], orientation=range(0, 40, 10), posX=[0, 31], posY=[5])
    assert sub.factor_sizes == (1, 1, 2, 4, 2, 1) and len(sub) == 16
    assert sub.factor_values("scale").tolist() == pytest.approx([0.6, 0.8])
    f = sub.index_to_factors(torch.arange(16))
    full = torch.stack([torch.full((16,), 0), torch.full((16,), 2), torch.tensor([1, 3])[f[:, 2]],
                        torch.tensor([0, 10, 20, 30])[f[:, 3]], torch.tensor([0, 31])[f[:, 4]], torch.full((16,), 5)], 1)
    assert torch.equal(sub.images, ds.sample_observations_from_factors(full)), "subset = the same images of the full grid"
    assert torch.equal(ds.sample(64, 7)[0], ds.sample(64, 7)[0]), "deterministic by seed"
    assert not torch.equal(ds.sample(64, 7)[1], ds.sample(64, 8)[1])
    with pytest.raises(InputError, match="unknown factor"): ds.subset(size=[0])
    with pytest.raises(InputError, match=r"\[0, 6\)"): ds.subset(scale=[6])


def test_orientation_ends_identical():
    x = DSprites("procedural").subset(orientation=[0, 39], posX=[7], posY=[20]).images.view(3, 6, 2, 64, 64)
    assert torch.equal(x[:, :, 0], x[:, :, 1])


def test_numpy_rng_and_uint8_contract():
    ds = DSprites("procedural")
    x, f = ds.sample(8, np.random.default_rng(0))
    assert x.dtype == torch.uint8 and x.shape == (8, 1, 64, 64) and f.dtype == torch.int64
    assert set(x.unique().tolist()) <= {0, 255}


# ---- the packed cache ----------------------------------------------------------------------------

def test_cache_written_verified_and_rebuilt(datadir):
    mk = lambda: DSprites("procedural", cache=True).subset(shape=[0], scale=[5], orientation=[0, 3], posY=[9])
    first = mk().images
    p = mk().cache_path()
    assert p.exists() and p.with_suffix(".json").exists() and p.parent == datadir / "dsprites"
    assert not list(p.parent.glob("*.part")), "no temporary files left"
    raw = bytearray(p.read_bytes()); raw[-3] ^= 0xFF; p.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="sha256"):
        data.load_bit_images(p, first.shape, data.DSPRITES_GEOMETRY)
    with pytest.warns(UserWarning, match="re-rendering"):
        again = mk().images
    assert torch.equal(again, first)
    assert torch.equal(data.load_bit_images(p, first.shape, data.DSPRITES_GEOMETRY), first), "rewritten"


def test_cache_geometry_mismatch(tmp_path):
    im = torch.zeros(3, 1, 4, 4, dtype=torch.uint8); im[:, :, 1] = 255
    p = data.save_bit_images(im, tmp_path / "c.bits.npy", {"v": 1})
    assert torch.equal(data.load_bit_images(p, im.shape, {"v": 1}), im)
    with pytest.raises(CorruptFileError, match="expected"): data.load_bit_images(p, im.shape, {"v": 2})


# ---- official dSprites through the registry -------------------------------------------------------

def test_official_missing_message(datadir):
    assert DSprites().source == "procedural"
    with pytest.raises(DataNotFoundError) as e: DSprites("official")
    msg = str(e.value)
    assert data.DSPRITES_FILE in msg and str(datadir / "dsprites") in msg and "github.com/deepmind" in msg


def test_official_corrupt(datadir):
    (datadir / "dsprites").mkdir(parents=True)
    np.savez(datadir / "dsprites" / data.DSPRITES_FILE, imgs=np.zeros((3, 64, 64), np.uint8))
    with pytest.raises(CorruptFileError, match="737280"): DSprites("official")


# ---- digits --------------------------------------------------------------------------------------

def test_embedded_digits(datadir):
    d = load_digits(n=600, seed=3)
    assert d.source.startswith(digits.EMBEDDED_SOURCE) and d.images.shape == (600, 1, 28, 28) and d.images.dtype == torch.uint8
    assert torch.equal(d.images, load_digits(n=600, seed=3).images)
    t = load_digits(split="test", n=600, seed=3)
    hs = lambda x: {hashlib.sha1(i.numpy().tobytes()).hexdigest() for i in x.images}
    assert len(hs(d)) == 600 and not hs(d) & hs(t)
    with pytest.raises(InputError, match="split"): load_digits(split="valid")
    with pytest.raises(InputError, match="positive"): load_digits(n=0)


def test_mnist_missing_and_present(datadir, trust_mnist_files):
    with pytest.raises(DataNotFoundError, match="MNIST"): load_digits("mnist")
    raw = datadir / "MNIST" / "raw"; raw.mkdir(parents=True)
    imgs = np.arange(5 * 28 * 28, dtype=np.uint32).astype(np.uint8)
    head = lambda *dims: bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    for split, (im, lb) in digits.MNIST_FILES.items():   # torchvision's extracted (uncompressed) files
        (raw / im).write_bytes(head(5, 28, 28) + imgs.tobytes())
        (raw / lb).write_bytes(head(5) + bytes([3, 1, 4, 1, 5]))
    with pytest.raises(CorruptFileError, match="wrong size"): load_digits()    # not the real files: refused, one line
    assert [s.status for s in registry.verify("mnist")] == ["wrong size"] * 4             # the extracted files, each
    trust_mnist_files(raw)                                                      # checked by their own sizes and hashes
    d = load_digits()
    assert d.source.startswith("MNIST") and d.labels.tolist() == [3, 1, 4, 1, 5] and d.images.shape == (5, 1, 28, 28)
    (raw / "t10k-labels-idx1-ubyte").write_bytes(head(6) + bytes(5))
    with pytest.raises(CorruptFileError, match="wrong sha256"): load_digits("mnist", split="test")
    with pytest.raises(CorruptFileError, match="header says"): digits.read_idx(raw / "t10k-labels-idx1-ubyte")


# ---- samplers ------------------------------------------------------------------------------------

def test_samplers():
    ds = DSprites("procedural").subset(shape=[1], posX=range(0, 32, 4))
    g = make_generator(0)
    b = SingleSampler(ds, device="cpu").sample(16, g)
    assert b["x"].dtype == torch.float32 and b["x"].max() == 1 and set(b) == {"x", "factors"}
    fly = SingleSampler(DSprites("procedural").subset(shape=[1], posX=range(0, 32, 4)), device="cpu", materialize=False)
    assert torch.equal(fly.sample(16, make_generator(0))["x"], b["x"])
    li = LabelledImages(torch.full((10, 1, 28, 28), 255, dtype=torch.uint8), torch.arange(10), list("abcdefghij"), "t")
    tb = TargetBackgroundSampler(li, ds, device="cpu").sample(4, g)
    assert set(tb) == {"x", "labels", "y", "factors_y"}
    with pytest.raises(InputError, match="positive"): SingleSampler(li, device="cpu").sample(-1, g)
    with pytest.raises(InputError, match="torch.Generator"): SingleSampler(li, device="cpu").sample(4, 1)


# ---- registry -----------------------------------------------------------------------------------

def test_missing_file_message(datadir, toy):
    with pytest.raises(DataNotFoundError) as e: require("toy")
    msg = str(e.value)
    assert "a.bin (16 bytes) from file://" in msg and "b.bin (100 bytes)" in msg and str(datadir / "toy") in msg


def test_download_and_verify(datadir, toy):
    paths = prepare("toy")
    assert set(paths) == {"a.bin", "b.bin"}
    assert [s.status for s in verify("toy")] == ["ok", "unverified"]
    (datadir / "toy" / "a.bin").write_bytes(b"hello disentbooK")   # same size, other content
    with pytest.raises(CorruptFileError, match="wrong sha256"): require("toy")
    (datadir / "toy" / "a.bin").write_bytes(b"hi")
    assert verify("toy")[0].status == "wrong size"
    with pytest.raises(CorruptFileError, match="wrong size"): prepare("toy")


def test_download_wrong_hash_leaves_nothing(datadir, toy):
    bad = RemoteFile("a.bin", "0" * 64, 16, toy[0].url)
    DATASETS["toy"] = DatasetInfo("toy", (bad,), "toy", "", "", "", "")
    with pytest.raises(CorruptFileError, match="nothing was kept"): prepare("toy")
    assert not (datadir / "toy").exists() or os.listdir(datadir / "toy") == []


def test_download_unreachable_and_offline(datadir, toy, monkeypatch, tmp_path):
    DATASETS["toy"] = DatasetInfo("toy", (RemoteFile("a.bin", None, None, (tmp_path / "nope").as_uri()),),
                                  "toy", "", "", "", "")
    with pytest.raises(DataNotFoundError, match="put these file"): prepare("toy")
    assert not (datadir / "toy").exists() or os.listdir(datadir / "toy") == []
    monkeypatch.setenv("DISENTBOOK_OFFLINE", "1")
    with pytest.raises(DataNotFoundError, match="DISENTBOOK_OFFLINE"): prepare("toy")


def test_registry_entries_are_real_hashes():
    for name in ["dsprites", "mnist", "shapes3d", "smallnorb", "mpi3d_toy", "mpi3d_realistic", "mpi3d_real",
                 "celeba", "affectnet", "imagenet_grass", "chairs"]:
        info = DATASETS[name]
        for f in info.files:
            assert f.sha256 is None or len(f.sha256) == 64
    assert DATASETS["dsprites"].files[0].sha256 is None, "no trustworthy sha256 known for the npz"
    assert DATASETS["affectnet"].manual and DATASETS["celeba"].manual
    with pytest.raises(InputError, match="known:"): DATASETS["nope"]
    df = registry.list_datasets()
    assert {"name", "present", "size_mb"} <= set(df.columns)


# ---- issue 14 / 12: lazy full dSprites, unwritable cache folder, verify texts ------------------------

def test_full_dsprites_sampler_is_lazy_on_cpu(monkeypatch):
    "Fails before: SingleSampler(DSprites()) rendered all 737,280 images (4 GB peak) before the first batch."
    def refuse(self, chunk=8192): raise AssertionError("materialised the whole set")
    monkeypatch.setattr(DSprites, "_materialize", refuse)
    s = SingleSampler(DSprites("procedural"), device="cpu")
    b = s.sample(8, make_generator(0))
    assert s.data._images is None and b["x"].shape == (8, 1, 64, 64)
    assert torch.equal(b["x"] * 255, s.data.sample_observations_from_factors(b["factors"]).float())
    small = DSprites("procedural").subset(shape=[0], orientation=[0], posY=[0, 1])      # 384 images: materialised
    monkeypatch.undo()
    assert SingleSampler(small, device="cpu").data._images is not None
    assert SingleSampler(DSprites("procedural").subset(shape=[0], orientation=[0]), device="cpu", materialize=False).data._images is None


@pytest.mark.parametrize("how", ["file", "chmod"])
def test_unwritable_cache_folder_warns_before_rendering(tmp_path, monkeypatch, how):
    "Fails before: the render ran to the end, then save_bit_images raised (PermissionError / NotADirectoryError)."
    if how == "file":
        root = tmp_path / "data"; root.write_text("a file where the data folder should be")
    else:
        if os.geteuid() == 0: pytest.skip("root can write into a read-only folder")
        root = tmp_path / "ro"; root.mkdir(); root.chmod(0o555)
    monkeypatch.setenv("DISENTBOOK_DATA", str(root))
    seen = []
    real = DSprites._render
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        monkeypatch.setattr(DSprites, "_render", lambda self, f: seen.append(len(w)) or real(self, f))
        im = DSprites("procedural", cache=True).subset(shape=[0], scale=[0], orientation=[0, 1]).images
    assert im.shape == (2048, 1, 64, 64) and seen and min(seen) >= 1, "warned before the first render"
    msg = str(w[0].message)
    assert "cannot write to" in msg and str(root) in msg and "DISENTBOOK_DATA" in msg


def test_verify_report_texts(datadir):
    "Fails before (no verify_report; the CLI's text suggested `data prepare`, which downloads)."
    r = registry.verify_report("dsprites")
    assert r.usable and not r.complete and "procedurally" in r.text and data.DSPRITES_FILE in r.text
    m = registry.verify_report("mnist")
    assert not m.usable and not m.complete and str(datadir / "MNIST" / "raw") in m.text
    for rep in (r, m, registry.verify_report("celeba"), registry.verify_report("imagenet_grass")):
        assert "prepare" not in rep.text and "download them" not in rep.text, rep.text
    assert "disentbook data prepare mnist" in registry.verify_report("mnist", downloads=True).text
    with pytest.raises(DataNotFoundError) as e: prepare("mnist", download=False)
    assert "prepare" not in str(e.value)
