"""DIP-VAE reproduction: the smoke run end to end, the hit/miss rule, the CelebA loader on a tiny fixture."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.repro import dipvae as R
from disentbook.data import celeba as CB
from disentbook.core import DataNotFoundError, InputError, REPRODUCTIONS, paper_values


@pytest.fixture
def dip():
    import disentbook.eval.dipvae as real
    return real


def test_smoke_end_to_end(dip, tmp_path, capsys):
    res = REPRODUCTIONS["dipvae"]("smoke", out_dir=tmp_path, device="cpu", sweep=True)
    for f in ("report.md", "metrics.json", "table.csv", "traversals.png", "figure1_sap_zdiff_vs_recon.png",
              "traversals/vae.png", "models/vae/train/checkpoint/state.pt", "models/vae/losses.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    md = (tmp_path / "report.md").read_text()
    pv = paper_values("dipvae").query("dataset == 'dsprites'")
    for row in ("VAE", "DIP-VAE-I (lambda_od=10)"):
        line = next(l for l in md.splitlines() if l.startswith(f"| {row} |"))
        for metric, fmt in (("sap", "{:.4f}"), ("zdiff", "{:.1f}"), ("recon_error_per_pixel", "{:.4f}")):
            assert fmt.format(pv.query("row == @row and metric == @metric").value.item()) in line, (row, metric)
    assert "Hit rule" in md and ("DOES NOT HOLD" in md or "HOLDS" in md)
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert set(m["dsprites"]) == {"VAE", "DIP-VAE-I (lambda_od=10)"} and len(m["sweep"]) == 4
    assert all(r["verdict"] in ("hit", "miss (higher)", "miss (lower)") for r in m["table"])
    assert m["celeba"] == {} and "only at the paper scale or with `celeba_root`" in md
    assert "## Z-diff: how much is the classifier's" in md
    assert {"zdiff_svm_standardized", "zdiff_logistic"} <= set(m["dsprites"]["VAE"])
    # a second run reuses the trained models (same settings), without training again
    capsys.readouterr()
    R.reproduce_dipvae("smoke", out_dir=tmp_path, device="cpu")
    assert json.loads((tmp_path / "metrics.json").read_text())["dsprites"] == m["dsprites"]


def test_hit_miss_rule():
    assert R.judge("zdiff", 76.4, 81.3) == "hit" and R.judge("zdiff", 76.2, 81.3) == "miss (lower)"
    assert R.judge("zdiff", 99.9, 81.3) == "miss (higher)"
    assert R.judge("sap", 0.0, 0.0417) == "hit"               # the absolute floor 0.05 for small paper values
    assert R.judge("sap", 0.2, 0.0417) == "miss (higher)"
    assert R.judge("sap", 0.42, 0.5253) == "hit" and R.judge("sap", 0.39, 0.5253) == "miss (lower)"
    assert R.judge("recon_error_per_pixel", 0.0030, 0.0017) == "hit"
    assert R.judge("recon_error_per_pixel", 0.02, 0.0017) == "miss (higher)"
    assert R.judge("recon_error_per_pixel", 0.0008, 0.0017) == "miss (lower)"
    assert R.judge("sap", float("nan"), 0.1) == "n/a"
    with pytest.raises(InputError, match="no hit rule"): R.judge("fid", 1.0, 1.0)
    # a bad result is reported as a miss in the markdown table, next to the paper value
    md = R.table_markdown({"VAE": dict(zdiff=50.0, sap=0.3, recon_error_per_pixel=0.05, recon_nll_per_pixel=0.1)})
    assert md.count("miss") == 3 and "81.3" in md


def test_findings_are_checked_honestly():
    paper = R._pv("dsprites")
    assert all(f["holds"] for f in R.check_findings(paper))
    bad = {r: dict(m) for r, m in paper.items()}
    bad["DIP-VAE-I (lambda_od=10)"]["recon_error_per_pixel"] = 0.01
    bad["beta-VAE (beta=60)"]["sap"] = 0.01
    f1, f2 = R.check_findings(bad, steps=1000)
    assert f1["holds"] is False and "recon" in f1["note"] and f2["holds"] is False and "sap" in f2["note"]


def test_bad_scale():
    with pytest.raises(InputError, match="scale must be one of smoke, quick, paper, got 'huge'"):
        R.reproduce_dipvae("huge", out_dir="unused")


def _celeba_fixture(folder: Path, n=4):
    from PIL import Image
    rng = np.random.default_rng(0); (folder / "img_align_celeba").mkdir(parents=True)
    files = [f"{i + 1:06d}.jpg" for i in range(n)]
    for f in files: Image.fromarray(rng.integers(0, 255, (218, 178, 3), dtype=np.uint8)).save(folder / "img_align_celeba" / f)
    (folder / "list_attr_celeba.txt").write_text(
        f"{n}\nSmiling Male\n" + "".join(f"{f}  1 -1\n" if i % 2 else f"{f} -1  1\n" for i, f in enumerate(files)))
    (folder / "list_eval_partition.txt").write_text("".join(f"{f} {0 if i < n - 1 else 2}\n" for i, f in enumerate(files)))


def test_celeba_loader(tmp_path, monkeypatch):
    _celeba_fixture(tmp_path / "celeba")
    c = CB.load_celeba(tmp_path / "celeba", "train")
    assert c.images.shape == (3, 3, 64, 64) and c.images.dtype == torch.uint8
    assert c.attribute_names == ("Smiling", "Male") and c.attributes.tolist() == [[0, 1], [1, 0], [0, 1]]
    assert CB.load_celeba(tmp_path / "celeba", "test", size=32, attributes=False).images.shape == (1, 3, 32, 32)
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path))           # default root: <data dir>/celeba
    assert len(CB.load_celeba(split="all")) == 4
    with pytest.raises(DataNotFoundError, match="missing img_align_celeba/, list_attr_celeba.txt"):
        CB.load_celeba(tmp_path / "empty")
    with pytest.raises(InputError, match="split must be one of"): CB.load_celeba(tmp_path / "celeba", "dev")


def test_celeba_skipped_with_message(dip, tmp_path, monkeypatch):
    "At paper scale without CelebA files the CelebA part is skipped with a clear message (the training is faked)."
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setitem(R.DIPVAE_SCALES, "paper", dict(R.DIPVAE_SCALES["smoke"], models=("VAE",)))
    R.reproduce_dipvae("paper", out_dir=tmp_path / "out", device="cpu", sweep=False)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "CelebA columns skipped: CelebA not found in" in md


def test_celeba_tables_1_and_2_on_a_fixture(dip, tmp_path):
    "The CelebA path end to end at smoke scale on a fixture in the official layout: Table 1 columns and Table 2."
    names = R.CELEBA_TABLE2_ATTRIBUTES[:-1] + ("Smiling",)          # Wearing_Lipstick missing from the file
    CB.make_celeba_fixture(tmp_path / "celeba", n=24, names=names, seed=1)
    res = R.reproduce_dipvae("smoke", out_dir=tmp_path / "out", device="cpu", celeba_root=tmp_path / "celeba")
    assert set(res["celeba"]) == {s["row"] for s in R.CELEBA_MODELS}
    assert set(res["celeba_table2"]) == {s["row"] for s in R.CELEBA_TABLE2_MODELS}
    for row, acc in res["celeba_table2"].items():
        assert set(acc) == set(R.CELEBA_TABLE2_ATTRIBUTES[:-1]) and all(0 <= v <= 100 for v in acc.values())
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Table 2, CelebA attribute classification" in md and "not computed: Wearing_Lipstick: not in list_attr_celeba.txt" in md
    assert "(71.8)" in md and "(Table 2) DIP-VAE-I" in md
    for s in R._celeba_specs():
        assert (tmp_path / "out" / "celeba" / "models" / s["slug"] / "eval.json").exists()


def test_tradeoff_finding():
    def pt(obj, label, sap, rec): return dict(spec=dict(objective=obj, label=label), metrics=dict(sap=sap, recon_error_per_pixel=rec))
    pts = [pt("vae", "VAE", 0.10, 0.010), pt("beta_vae", "b16", 0.30, 0.014), pt("beta_vae", "b64", 0.60, 0.030),
           pt("dip_vae_i", "i10", 0.20, 0.011), pt("dip_vae_ii", "ii100", 0.40, 0.013)]
    f = R.tradeoff_finding(pts)
    assert f["holds"] is True and "recon limit 0.0150" in f["numbers"] and "b64" not in f["numbers"]   # b64 over budget
    assert R.tradeoff_finding(pts, budget=3.0)["holds"] is False                                        # b64 now counts
    assert R.tradeoff_finding(pts[1:])["holds"] is None
    assert R.tradeoff_finding([p for p in pts if p["spec"]["objective"] != "dip_vae_ii"])["holds"] is False
