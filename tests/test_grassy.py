"Golden-value tests of disentbook.grassy: grass crops, Eq. 10-11, Grassy-MNIST sizes, CelebA / AffectNet loaders on fixtures."
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.core import DataNotFoundError, InputError, make_generator
from disentbook.data.digits import EMBEDDED_SOURCE, embedded_digits
from disentbook.data.grassy import (SKIMAGE_GRASS_SOURCE, grass_images, grass_patches, make_grassy_mnist, random_crops, skimage_grass, superimpose)
from disentbook.data.celeba import celeba_glasses_hats
from disentbook.data.affectnet import load_affectnet


def test_skimage_grass_is_bundled_real_photo():
    g = skimage_grass()
    assert g.shape == (1, 512, 512) and g.dtype == torch.float32
    assert 0.0 <= g.min() and g.max() <= 1.0 and g.std() > 0.05          # a textured photo, not a constant


def test_random_crops_are_contiguous_windows():
    im = torch.arange(10 * 12, dtype=torch.float32).view(1, 10, 12) / 255
    c = random_crops([im], 300, 4, make_generator(1)).long()
    want = torch.arange(4)[:, None] * 12 + torch.arange(4)[None]
    assert torch.equal(c[:, 0] - c[:, 0, :1, :1], want.expand(300, 4, 4))
    assert c[:, 0, 0, 0].max() <= 6 * 12 + 8 and set((c[:, 0, 0, 0] % 12).tolist()) == set(range(9))
    with pytest.raises(InputError, match="smaller than"): random_crops([im], 2, 11)
    with pytest.raises(InputError, match="positive"): random_crops([im], 0, 4)


def test_superimpose_linear_and_threshold():
    y = torch.tensor([0.1, 0.3, 0.31, 1.0]).view(1, 1, 1, 4)
    t = torch.tensor([1.0, 1.0, 0.0, 0.5]).view(1, 1, 1, 4)
    assert torch.allclose(superimpose(y, t).flatten(), torch.tensor([0.55, 0.65, 0.155, 0.75]))
    assert torch.allclose(superimpose(y, t, threshold=0.3).flatten(), torch.tensor([0.0, 0.0, 0.155, 0.75]))
    assert torch.allclose(superimpose(y, t, rho=1.0), y) and torch.allclose(superimpose(y, t, rho=0.0), t)
    with pytest.raises(InputError, match="rho"): superimpose(y, t, rho=-0.1)


def test_grassy_mnist_sizes_balance_and_equations():
    lin = make_grassy_mnist("linear", per_digit=12, n_background=50, digits="embedded", grass="skimage", seed=3)
    nl = make_grassy_mnist("nonlinear", per_digit=12, n_background=50, digits="embedded", grass="skimage", seed=3, threshold=0.5)
    assert lin.target.images.shape == (120, 1, 28, 28) and lin.background.images.shape == (50, 1, 28, 28)
    assert torch.bincount(lin.target.labels).tolist() == [12] * 10 and (lin.background.labels == 0).all()
    assert SKIMAGE_GRASS_SOURCE in lin.background.source and EMBEDDED_SOURCE in lin.target.source
    yb = lin.background.images[lin.info["pair_index"]]
    dark = yb.float() / 255 <= 0.5
    assert (nl.target.images[dark] == 0).all()
    assert torch.equal(nl.target.images[~dark], lin.target.images[~dark])
    assert nl.info["threshold"] == 0.5 and lin.info["threshold"] is None
    again = make_grassy_mnist("linear", per_digit=12, n_background=50, digits="embedded", grass="skimage", seed=3)
    assert torch.equal(again.target.images, lin.target.images)
    with pytest.raises(InputError, match="'linear' or 'nonlinear'"): make_grassy_mnist("cubic")


def test_grassy_mnist_uses_the_real_embedded_digits():
    "Every linear target pixel is round((grass + digit) / 2) with an embedded MNIST digit of the target's label."
    lin = make_grassy_mnist("linear", per_digit=5, n_background=20, digits="embedded", grass="skimage", seed=1)
    yb = lin.background.images[lin.info["pair_index"]][:, 0].numpy().astype(np.int16)
    t = 2 * lin.target.images[:, 0].numpy().astype(np.int16) - yb                   # the digit, up to rounding (+-1)
    x10k, y10k = embedded_digits()
    for ti, lab in zip(t, lin.target.labels.tolist()):
        same = x10k[y10k == lab].astype(np.int16)
        err = np.abs(same - ti.clip(0, 255)).reshape(len(same), -1).max(1)
        assert err.min() <= 1, f"no embedded {lab} within 1 grey level (closest: {err.min()})"
    with pytest.raises(InputError, match=r"per_digit=714: .* only 713 of the rarest digit"):   # the train split has 713 fives
        make_grassy_mnist(per_digit=714, n_background=10, digits="embedded", grass="skimage")
    assert len(make_grassy_mnist(per_digit=713, n_background=10, digits="embedded", grass="skimage").target) == 7130


def test_grass_source_choice(tmp_path):
    with pytest.raises(DataNotFoundError): grass_images("imagenet", root=tmp_path)
    assert grass_images("auto", root=tmp_path)[1] == SKIMAGE_GRASS_SOURCE
    with pytest.raises(InputError, match="channels"): grass_images("skimage", channels=2)
    bg = grass_patches(20, "skimage", channels=3)
    assert bg.images.shape == (20, 3, 28, 28) and torch.equal(bg.images[:, 0], bg.images[:, 2])


def _celeba(folder, n=12):
    from PIL import Image
    rng = np.random.default_rng(0); (folder / "img_align_celeba").mkdir(parents=True)
    files = [f"{i + 1:06d}.jpg" for i in range(n)]
    for f in files: Image.fromarray(rng.integers(0, 255, (218, 178, 3), dtype=np.uint8)).save(folder / "img_align_celeba" / f)
    attrs = [(1 if i % 4 == 0 else -1, 1 if i % 4 == 1 else -1) for i in range(n)]
    attrs[0] = (1, 1)
    (folder / "list_attr_celeba.txt").write_text(f"{n}\nEyeglasses Wearing_Hat\n" + "".join(
        f"{f} {a:2d} {b:2d}\n" for f, (a, b) in zip(files, attrs)))
    (folder / "list_eval_partition.txt").write_text("".join(f"{f} 0\n" for f in files))
    return attrs


def test_celeba_glasses_hats(tmp_path):
    attrs = _celeba(tmp_path)
    d = celeba_glasses_hats(tmp_path, per_class=2, n_background=6, size=8)
    assert d.target.images.shape == (4, 3, 8, 8) and torch.bincount(d.target.labels).tolist() == [2, 2]
    assert len(d.background) == 6 and d.target.class_names == ("eyeglasses", "hat")
    with pytest.raises(InputError, match="eyeglasses: need 3, found 2"):   # image 1 has both and is left out
        celeba_glasses_hats(tmp_path, per_class=3, n_background=6, size=8)
    with pytest.raises(DataNotFoundError): celeba_glasses_hats(tmp_path / "missing")


def test_affectnet_official_layout(tmp_path):
    from PIL import Image
    (tmp_path / "Manually_Annotated_file_lists").mkdir()
    lines = ["subDirectory_filePath,face_x,face_y,face_width,face_height,facial_landmarks,expression,valence,arousal"]
    rng = np.random.default_rng(0)
    for code, count in [(0, 4), (1, 3), (2, 1), (7, 2), (8, 2), (10, 1)]:
        for j in range(count):
            rel = f"{code}/{j}.png"; (tmp_path / "Manually_Annotated_Images" / str(code)).mkdir(parents=True, exist_ok=True)
            img = np.full((30, 20, 3), 10 * code, np.uint8); img[:5] = 255
            Image.fromarray(img).save(tmp_path / "Manually_Annotated_Images" / rel)
            lines.append(f'{rel},0,10,20,20,"",{code},0,0')
    (tmp_path / "Manually_Annotated_file_lists" / "training.csv").write_text("\n".join(lines) + "\n")
    d = load_affectnet(tmp_path, size=8, per_class=2, n_background=3)
    assert torch.bincount(d.target.labels, minlength=7).tolist() == [2, 1, 0, 0, 0, 0, 2]   # happy, sad, contempt
    assert d.info["per_class_counts"]["happy"] == 2 and len(d.background) == 3
    assert (d.target.images[d.target.labels == 0] == 10).all()          # cropped to the face box (below the white band)
    with pytest.raises(InputError, match="'train' or 'validation'"): load_affectnet(tmp_path, split="test")
