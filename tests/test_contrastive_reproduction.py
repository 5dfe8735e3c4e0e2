"The contrastive reproduction at smoke scale: files, paper values beside ours, hit rule, claims, reuse, skipped datasets."
import json
from pathlib import Path

import pytest

from disentbook.core import REPRODUCTIONS, InputError, paper_values
from disentbook.repro.contrastive import (CONTRASTIVE_SCALES, METHODS, _scale_config, _steps, check_claims, judge, paper_table, reproduce_contrastive, table_rows)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    d = tmp_path_factory.mktemp("contrastive_smoke")
    return d, reproduce_contrastive("smoke", out_dir=d, device="cpu", sweep=True)


def test_smoke_writes_everything(smoke):
    d, res = smoke
    for f in ("report.md", "metrics.json", "table.csv", "figure4_tsne_s.png", "figure5_decoding.png",
              "figure6a_w2_training.png", "figure7_reconstructions_L-MNIST.png", "figure7_reconstructions_NL-MNIST.png",
              "figure8_interpolation.png", "figure6b_ca_vs_lambda.png", "figure11_ca_vs_size.png"):
        assert (d / f).stat().st_size > 0, f
    for ds in ("L-MNIST", "NL-MNIST"):
        for m in METHODS:
            ev = json.loads((d / "models" / ds / m["slug"] / "eval.json").read_text())
            assert set(ev["metrics"]) >= {"ca_z", "ss_z", "ca_s", "ss_s", "l_w2", "s_y_norm2"}
    assert REPRODUCTIONS["contrastive"] is reproduce_contrastive


def test_report_puts_the_papers_values_beside_ours(smoke):
    d, res = smoke
    md = (d / "report.md").read_text()
    assert "92.17" in md and "4.60" in md and "38.12" in md          # L-MNIST Eq. 8 CA_s and L_W2, NL-MNIST sRb L_W2
    assert "## The paper's claims, checked" in md and ("HOLDS" in md or "DOES NOT HOLD" in md)
    rows = res["table"]
    assert len(rows) == 2 * 4 * 5 and all(r["paper"] is not None for r in rows)
    m = json.loads((d / "metrics.json").read_text())
    assert m["scale"] == "smoke" and len(m["sweeps"]["lambdas"]) == 2 and len(m["sweeps"]["sizes"]) == 4


def test_rerun_reuses_trained_models(smoke):
    d, res = smoke
    stamp = (d / "models" / "L-MNIST" / "ours_eq8" / "eval.json").stat().st_mtime
    res2 = reproduce_contrastive("smoke", out_dir=d, device="cpu", sweep=False)
    assert (d / "models" / "L-MNIST" / "ours_eq8" / "eval.json").stat().st_mtime == stamp
    assert res2["results"]["L-MNIST"]["Ours (Eq. 8)"] == res["results"]["L-MNIST"]["Ours (Eq. 8)"]


def test_missing_user_data_is_skipped_with_reason(tmp_path):
    res = reproduce_contrastive("smoke", out_dir=tmp_path, device="cpu", sweep=False, datasets=("CelebA",), data_root=tmp_path / "none")
    assert res["results"] == {} and any("CelebA skipped" in n for n in res["notes"])


def test_hit_rule_and_claims():
    assert judge("ca_s", 87.2, 92.17) == "hit" and judge("ca_s", 87.1, 92.17) == "miss (lower)"
    assert judge("l_w2", 2.3, 4.6) == "hit" and judge("l_w2", 2.2, 4.6) == "miss (lower)"
    assert judge("ss_s", 0.66, 0.55) == "miss (higher)"
    with pytest.raises(InputError, match="no hit rule"): judge("fid", 1.0, 1.0)
    paper = paper_table()
    assert paper["L-MNIST"]["Ours (Eq. 8)"]["l_w2"] == 4.60 and paper["NL-MNIST"]["sRb-VAE"]["l_w2"] == 38.12
    claims = check_claims({"L-MNIST": {r: dict(v, chance_ca=10.5) for r, v in paper["L-MNIST"].items()}})
    # the paper's own L-MNIST numbers: Eq. 8's L_W2 4.60 <= 0.75 * 8.88; CA_s 91.23, 92.17 > 89.02, 65.14; CA_z 12.4 / 11.9
    assert [c["holds"] for c in claims] == [True, True, True]
    nl = check_claims({"NL-MNIST": {r: dict(v, chance_ca=10.5) for r, v in paper["NL-MNIST"].items()}})
    assert [c["holds"] for c in nl] == [True, True, True]
    assert check_claims({"L-MNIST": {"cVAE": {}}})[0]["holds"] is None


def test_scales():
    assert set(CONTRASTIVE_SCALES) == {"smoke", "quick", "paper"}
    assert CONTRASTIVE_SCALES["paper"]["batch_size"] == 128 and CONTRASTIVE_SCALES["paper"]["lr"] == 1e-3
    assert _steps(_scale_config("paper"), 49_860) == 77_907                      # 200 epochs of 49,860 at batch 128
    with pytest.raises(InputError, match="smoke, quick, paper"): _scale_config("big")
    pv = paper_values("contrastive")
    assert len(pv.query("table == 'Table 1'")) == 4 * 4 * 5 and len(pv.query("table == 'Table 2'")) == 7 * 7


def _faces(root: Path, n=40):
    "Tiny CelebA and AffectNet folders in the official layouts under the data directory `root`."
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    cel = root / "celeba"; (cel / "img_align_celeba").mkdir(parents=True)
    files = [f"{i + 1:06d}.jpg" for i in range(n)]
    for f in files: Image.fromarray(rng.integers(0, 255, (218, 178, 3), dtype=np.uint8)).save(cel / "img_align_celeba" / f)
    (cel / "list_attr_celeba.txt").write_text(f"{n}\nEyeglasses Wearing_Hat\n" + "".join(
        f"{f} {1 if i % 4 == 0 else -1:2d} {1 if i % 4 == 1 else -1:2d}\n" for i, f in enumerate(files)))
    (cel / "list_eval_partition.txt").write_text("".join(f"{f} 0\n" for f in files))
    af = root / "affectnet"; (af / "Manually_Annotated_file_lists").mkdir(parents=True)
    for split in ("training", "validation"):
        lines = ["subDirectory_filePath,face_x,face_y,face_width,face_height,facial_landmarks,expression,valence,arousal"]
        for code in range(8):
            for j in range(8):
                rel = f"{split}/{code}_{j}.jpg"; (af / "Manually_Annotated_Images" / split).mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 255, (80, 80, 3), dtype=np.uint8)).save(af / "Manually_Annotated_Images" / rel)
                lines.append(f'{rel},4,4,70,70,"",{code},0,0')
        (af / "Manually_Annotated_file_lists" / f"{split}.csv").write_text("\n".join(lines) + "\n")


def test_face_rows_from_user_files(tmp_path):
    from disentbook.repro.contrastive import load_dataset
    _faces(tmp_path / "data")
    tr, ev = load_dataset("CelebA", _scale_config("smoke"), root=tmp_path / "data")   # 6 per class, half held out per class
    assert len(tr.target) == len(ev.target) == 6 and sorted(ev.target.labels.tolist()) == [0, 0, 0, 1, 1, 1]
    assert len(tr.background) == len(ev.background) == 6 and tr.target.images.shape[1:] == (3, 64, 64)
    res = reproduce_contrastive("smoke", out_dir=tmp_path / "out", device="cpu", sweep=False, datasets=("AffectNet",),
                                data_root=tmp_path / "data")
    assert set(res["results"]) == {"AffectNet"} and set(res["results"]["AffectNet"]) == {m["row"] for m in METHODS}
    assert (tmp_path / "out" / "figure7_reconstructions_AffectNet.png").stat().st_size > 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "22.66" in md                                                      # AffectNet Eq. 8 CA_s of the paper
    ev = json.loads((tmp_path / "out" / "models" / "AffectNet" / "ours_eq8" / "eval.json").read_text())["metrics"]
    assert ev["n_eval"] == 7 * 6                                              # validation: 6 per expression
