"""DIP-VAE reproduction on the harness: the smoke run end to end, the claims on the paper's numbers, CelebA on a fixture."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from disentbook.repro import dipvae as R
from disentbook.data import celeba as CB
from disentbook.core import DataNotFoundError, InputError, REPRODUCTIONS, paper_values


def test_smoke_end_to_end(tmp_path):
    res = REPRODUCTIONS["dipvae"]("smoke", out_dir=tmp_path, device="cpu", sweep=True)
    for f in ("report.md", "metrics.json", "table.csv", "traversals.png", "figure1_sap_zdiff_vs_recon.png",
              "traversals/vae.png", "runs/dsprites/vae/seed0/train/checkpoint/config.json", "runs/dsprites/vae/losses.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    md = (tmp_path / "report.md").read_text()
    pv = paper_values("dipvae").query("dataset == 'dsprites'")
    for row in ("VAE", "DIP-VAE-I (lambda_od=10)"):
        line = next(l for l in md.splitlines() if l.startswith(f"| {row} |"))
        for metric, fmt in (("sap", "{:.4f}"), ("zdiff", "{:.1f}"), ("recon_error_per_pixel", "{:.4f}")):
            assert fmt.format(pv.query("row == @row and metric == @metric").value.item()) in line, (row, metric)
    assert "## Z-diff: how much is the classifier's" in md and "## Figure 1 sweep" in md
    assert set(res["results"]["Table 1"]) == {"VAE", "DIP-VAE-I (lambda_od=10)"} and len(res["results"]["Figure 1"]) == 4
    assert {r["verdict"] for r in res["table"]} <= {"not tested", "—"}                 # smoke never judges
    assert {c["verdict"] for c in res["claims"]} == {"not tested at this scale", "not checked"}
    assert "Table 1 (CelebA)" in res["skipped"] and "celeba_root" in md
    assert {"zdiff_svm_standardized", "zdiff_logistic"} <= set(res["results"]["Table 1"]["VAE"][0])
    assert "## Z-diff per factor" in md and {f"zdiff_recall_{f}" for f in ("shape", "scale", "orientation", "posX", "posY")} \
        <= set(res["results"]["Table 1"]["VAE"][0])                                  # which factors the score is made of
    # issue 24.5: no part bullets under claims not tested, and no "VAE not trained" about a VAE it trained
    assert "VAE not trained" not in md and "inconclusive;" not in md and "inconclusive (" not in md
    assert "- Table 2 not run (" in md or "Table 2 not run" in md                 # why Table 2's claims are not checked


def test_findings_hold_on_the_papers_own_numbers():
    "The paper's Table 1 as 5 seeds with a 1 % spread: findings (1)-(3) hold; a worse DIP-VAE-I breaks (1)."
    from disentbook.repro.claims import judge_claim
    from disentbook.repro.report import paper_lookup
    from disentbook.repro.verdicts import paper_seeds
    paper = paper_lookup("dipvae", "Table 1", "dsprites")
    seeds = paper_seeds(paper, 5, rel_sd=0.01)
    assert [judge_claim(c, seeds)["verdict"] for c in R.FINDINGS] == ["holds", "holds", "holds"]
    seeds["DIP-VAE-I (lambda_od=10)"]["recon_error_per_pixel"] = [0.01, 0.011, 0.012]
    f1 = judge_claim(R.FINDINGS[0], seeds)
    assert f1["verdict"] == "fails" and f1["note"]
    assert all(c.source for c in R.FINDINGS)


def test_bad_scale(tmp_path):
    with pytest.raises(InputError, match="scale must be one of smoke, quick, cpu, gpu, paper, got 'huge'"):
        R.reproduce_dipvae("huge", out_dir=tmp_path)


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


def test_celeba_skipped_with_message(tmp_path, monkeypatch):
    "At paper scale without CelebA files the CelebA tables are skipped with the loader's message (training faked small)."
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setitem(R.DIPVAE_SCALES, "paper", dict(R.DIPVAE_SCALES["smoke"], models=("VAE",)))
    res = R.reproduce_dipvae("paper", out_dir=tmp_path / "out", device="cpu", sweep=False)
    assert "CelebA not found in" in res["skipped"]["Table 1 (CelebA)"]


def test_celeba_tables_1_and_2_on_a_fixture(tmp_path, monkeypatch):
    "The CelebA path end to end at smoke scale on a fixture in the official layout: Table 1 columns and Table 2."
    monkeypatch.setitem(R.DIPVAE_SCALES, "smoke", dict(R.DIPVAE_SCALES["smoke"], models=("VAE",)))
    names = R.CELEBA_TABLE2_ATTRIBUTES[:-1] + ("Smiling",)          # Wearing_Lipstick missing from the file
    CB.make_celeba_fixture(tmp_path / "celeba", n=24, names=names, seed=1)
    res = R.reproduce_dipvae("smoke", out_dir=tmp_path / "out", device="cpu", celeba_root=tmp_path / "celeba")
    assert set(res["results"]["Table 1 (CelebA)"]) == {s["row"] for s in R.CELEBA_MODELS}
    assert set(res["results"]["Table 2"]) == {s["row"] for s in R.CELEBA_TABLE2_MODELS}
    for row, runs in res["results"]["Table 2"].items():
        acc = {a: runs[0][a] for a in R.CELEBA_TABLE2_ATTRIBUTES if a in runs[0]}
        assert set(acc) == set(R.CELEBA_TABLE2_ATTRIBUTES[:-1]) and all(0 <= v <= 100 for v in acc.values())
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Table 2, CelebA attribute classification" in md and "71.8" in md and "(5, Table 2) DIP-VAE-I" in md
    assert (tmp_path / "out" / "runs" / "celeba" / "dip_vae_i_lambda_d100_lambda_od2" / "seed0" / "eval.json").exists()


def test_tradeoff_claim_on_a_sweep():
    "Figure 1's claim is built from the sweep's seed means (budget 1.5× the VAE's error) and judged on seeds."
    from types import SimpleNamespace
    from disentbook.repro.claims import judge_claim
    pts = {"VAE": (0.10, 0.010), "β-VAE β=16": (0.30, 0.014), "β-VAE β=64": (0.60, 0.030),
           "DIP-VAE-I λod=10": (0.20, 0.011), "DIP-VAE-II λod=100": (0.40, 0.013)}
    obj = {"VAE": "vae", "β-VAE β=16": "beta_vae", "β-VAE β=64": "beta_vae", "DIP-VAE-I λod=10": "dip_vae_i", "DIP-VAE-II λod=100": "dip_vae_ii"}
    vals = {r: dict(sap=[s, s + 0.001, s - 0.001], recon_error_per_pixel=[e] * 3) for r, (s, e) in pts.items()}
    ctx = SimpleNamespace(results={"Figure 1": vals}, specs={"Figure 1": [dict(row=r, label=r, objective=o) for r, o in obj.items()]},
                          row=lambda s: s["row"], mean=lambda t, r, k: float(np.mean(vals[r][k])))
    c = R.tradeoff_claim(ctx)
    assert [p["text"] for p in c.parts][1:] == ["DIP-VAE-II λod=100 > DIP-VAE-I λod=10 on sap", "DIP-VAE-II λod=100 > β-VAE β=16 on sap"]
    fl = dict(sap=1e-4, recon_error_per_pixel=1e-4)                       # the metrics' resolution, as the harness passes it
    assert judge_claim(c, vals, floors=fl)["verdict"] == "holds"            # β=64 is over the budget
    assert judge_claim(R.tradeoff_claim(ctx, budget=3.0), vals, floors=fl)["verdict"] == "fails"   # now β=64 counts
    assert c.ours and c.source


def test_zdiff_on_attributes():
    "CelebA Z-diff (our protocol): chance on codes that ignore the attributes, far above it on codes that carry four of ten."
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, (2000, 10))
    z = rng.normal(size=(2000, 8)); z[:, :4] += 3 * a[:, :4]
    assert R.zdiff_attributes(rng.normal(size=(2000, 8)), a, 0, 64, 500, 400) == pytest.approx(10, abs=4)
    assert R.zdiff_attributes(z, a, 0, 64, 500, 400) > 35
    assert np.isnan(R.zdiff_attributes(z, np.zeros((2000, 3), int)))         # no attribute with both values: not scored


def test_zdiff_diagnosis_reproduces_each_run_and_notes_the_report(tmp_path, capsys):
    "benchmarks/diagnose_zdiff.py on a smoke reproduction: the per-factor recalls rebuild each run's own Z-diff exactly, "
    "its note reaches the report after a re-judge, and a folder without runs is one line."
    import importlib.util, sys
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("diagnose_zdiff", root / "benchmarks" / "diagnose_zdiff.py")
    D = importlib.util.module_from_spec(spec); spec.loader.exec_module(D)
    R.reproduce_dipvae("smoke", out_dir=tmp_path, device="cpu")
    assert D.main([str(tmp_path), "--scale", "smoke", "--n", "300", "--threads", "1", "--note", "--no-write"]) == 0
    out = capsys.readouterr().out
    runs = [l for l in out.splitlines() if " seed 0: Z-diff" in l]
    assert len(runs) == 2, out
    for line in runs:                                     # "Z-diff  40.0 (eval.json 40.0)": the run's own number, rebuilt
        ours, theirs = line.split("Z-diff")[1].split("(eval.json")
        assert float(ours) == pytest.approx(float(theirs.split(")")[0]), abs=0.05), line
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert sum(str(n).startswith(D.NOTE_HEAD) for n in m["notes"]) == 1
    from disentbook.repro.harness import rejudge
    rejudge(R.DIPVAE, tmp_path)
    assert "Z-diff per factor (shape / scale / orientation / x / y)" in (tmp_path / "report.md").read_text()
    assert D.main([str(tmp_path), "--scale", "smoke", "--n", "300", "--threads", "1", "--note", "--no-write"]) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert sum(str(n).startswith(D.NOTE_HEAD) for n in m["notes"]) == 1     # replaced, not repeated
    capsys.readouterr()
    assert D.main([str(tmp_path / "nothing-here")]) == 2
    assert capsys.readouterr().out.strip().count("\n") == 0
