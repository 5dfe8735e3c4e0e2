"The contrastive reproduction at smoke scale: files, paper values beside ours, hit rule, claims, reuse, skipped datasets."
import json
from pathlib import Path

import pytest

from disentbook.core import REPRODUCTIONS, InputError, paper_values
from disentbook.repro.contrastive import CONTRASTIVE, CONTRASTIVE_SCALES, METHODS, contrastive_claims, reproduce_contrastive
from disentbook.repro.contrastive_eval import AFFECTNET_CLASSES, load_dataset
from disentbook.repro.claims import judge_claim
from disentbook.repro.declare import scale_config
from disentbook.repro.report import paper_lookup


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
            ev = json.loads((d / "runs" / ds / m["slug"] / "seed0" / "eval.json").read_text())
            assert set(ev["metrics"]) >= {"ca_z", "ss_z", "ca_s", "ss_s", "l_w2", "s_y_norm2", "ca_z_above_chance",
                                          "rec_error_x", "mean_image_error_x"}
    assert REPRODUCTIONS["contrastive"] is reproduce_contrastive


def test_the_gate_tells_an_untrained_model_from_a_trained_one():
    """Untrained networks of this architecture cluster the digits in s above chance, so "did it learn" also asks for
    reconstructions better than the mean image: an untrained decoder fails it, a few hundred steps pass it."""
    import torch
    from disentbook.repro.contrastive import GATES
    from disentbook.repro.contrastive_eval import reconstruction_errors
    from disentbook.repro.contrastive_eval import contrastive_data, contrastive_model
    from disentbook.repro.verdicts import learned_rows
    from disentbook.training.config import TrainConfig
    from disentbook.training.trainer import Trainer
    from disentbook.objectives.base import make_objective
    from disentbook.data.samplers import TargetBackgroundSampler
    # the gate's mechanics need a model that reconstructs in 300 steps on the smoke set's 100 targets: the former Gaussian
    # recipe does; the paper's Bernoulli one stays above the mean image's squared error there (measured: 0.0242-0.0246
    # against 0.0227 at 600-1,200 steps), which the notebook reports
    cfg = scale_config(CONTRASTIVE, "smoke", dict(likelihood="gaussian"))
    assert cfg["model"]["likelihood"] == "gaussian"
    data = contrastive_data("L-MNIST", cfg, 0, dict(CONTRASTIVE.options))
    assert {g.metric for g in GATES} >= {"rec_error_x", "ca_s"}
    torch.manual_seed(0)
    model = contrastive_model(METHODS[0], data, dict(cfg, dataset="L-MNIST"))
    untrained = reconstruction_errors(model, data)
    assert untrained["rec_error_x"] > untrained["mean_image_error_x"]
    obj = make_objective("contrastive_w2_dirac", model=model)
    Trainer(model, obj, TargetBackgroundSampler(data.train.target, data.train.background, device="cpu"),
            TrainConfig(steps=300, batch_size=32, lr=1e-3, device="cpu", progress=False)).fit()
    trained = reconstruction_errors(model, data)
    assert trained["rec_error_x"] < trained["mean_image_error_x"] < untrained["rec_error_x"]
    rows = {"untrained": {k: [v] * 3 for k, v in untrained.items()}, "trained": {k: [v] * 3 for k, v in trained.items()}}
    g = learned_rows(GATES[:1], {r: {k: [x * (1 + 0.01 * i) for i, x in enumerate(v)] for k, v in m.items()} for r, m in rows.items()})
    assert not g["untrained"]["learned"] and g["trained"]["learned"]


def test_report_puts_the_papers_values_beside_ours(smoke):
    d, res = smoke
    md = (d / "report.md").read_text()
    assert "92.17" in md and "4.60" in md and "38.12" in md          # L-MNIST Eq. 8 CA_s and L_W2, NL-MNIST sRb L_W2
    assert "## The paper's claims, checked" in md and "NOT TESTED AT THIS SCALE" in md and "HOLDS" not in md
    rows = [r for r in res["table"] if r["table"].startswith("Table 1") and r["metric"] != "s_y_norm2"]
    assert len(rows) == 2 * 4 * 5 and all(r["paper"] is not None for r in rows)
    assert len(res["results"]["Figure 6b"]) == 2 and len(res["results"]["Figure 11"]) == 4


def test_resume_reuses_trained_models(smoke):
    d, res = smoke
    stamp = (d / "runs" / "L-MNIST" / "ours_eq8" / "seed0" / "eval.json").stat().st_mtime
    with pytest.raises(InputError, match="already holds a finished report"): reproduce_contrastive("smoke", out_dir=d, device="cpu")
    res2 = reproduce_contrastive("smoke", out_dir=d, device="cpu", sweep=False, resume=True)
    assert (d / "runs" / "L-MNIST" / "ours_eq8" / "seed0" / "eval.json").stat().st_mtime == stamp
    assert res2["results"]["Table 1 (L-MNIST)"] == res["results"]["Table 1 (L-MNIST)"]


def test_missing_user_data_is_skipped_with_reason(tmp_path):
    res = reproduce_contrastive("smoke", out_dir=tmp_path, device="cpu", sweep=False, datasets=["CelebA"], data_root=str(tmp_path / "none"))
    assert res["results"] == {} and "skipped" in res["skipped"]["Table 1 (CelebA)"]


def test_claims_hold_on_the_papers_own_numbers():
    """The paper's Table 1 as 5 seeds with an assumed 1 % spread (it prints none): none of the paper's claims (1)-(5) fails
    on its own numbers on L-MNIST or NL-MNIST and claim (1) holds; ours are labelled."""
    from types import SimpleNamespace
    from disentbook.repro.verdicts import paper_seeds
    ctx = SimpleNamespace(options=dict(datasets=None), cfg=dict(datasets=("L-MNIST", "NL-MNIST")), specs={}, row=lambda s: s["row"])
    claims = contrastive_claims(ctx)
    for ds in ("L-MNIST", "NL-MNIST"):
        pv = paper_lookup("contrastive", "Table 1", ds)
        seeds = paper_seeds(pv, 5, rel_sd=0.01)
        mine = [c for c in claims if c.table == f"Table 1 ({ds})"]
        got = [judge_claim(c, seeds)["verdict"] for c in mine if not c.ours]
        assert got[0] == "holds" and all(v in ("holds", "inconclusive") for v in got), (ds, got)
        assert [c.ours for c in mine] == [False] * 5 + [True] * 2 and all(c.source for c in mine)


def test_scales():
    assert set(CONTRASTIVE_SCALES) == {"smoke", "quick", "cpu", "gpu", "paper"} and CONTRASTIVE_SCALES["quick"]["seeds"] >= 3
    p = scale_config(CONTRASTIVE, "paper")
    assert p["train"]["batch_size"] == 128 and p["train"]["lr"] == 1e-3
    from disentbook.repro.runs import train_config
    from types import SimpleNamespace
    fake = SimpleNamespace(train=SimpleNamespace(target=[0] * 49_860))
    assert train_config(p, 0, "cpu", fake).steps == 77_907                       # 200 epochs of 49,860 at batch 128
    with pytest.raises(InputError, match="smoke, quick, cpu, gpu, paper"): scale_config(CONTRASTIVE, "big")
    pv = paper_values("contrastive")
    assert len(pv.query("table == 'Table 1'")) == 4 * 4 * 5 and len(pv.query("table == 'Table 2'")) == 7 * 7


def test_quick_trains_the_headline_claims_rows():
    "quick: the L-MNIST column (the one Section 4.1 quotes), every row its claims compare, >= 3 seeds; NL-MNIST's claims are still listed (so the report says 'not checked')."
    from types import SimpleNamespace
    q = scale_config(CONTRASTIVE, "quick")
    assert q["seeds"] >= 3 and tuple(q["datasets"]) == ("L-MNIST",)
    claims = contrastive_claims(SimpleNamespace(options=dict(datasets=None), cfg=q, specs={}, row=lambda s: s["row"]))
    named = lambda c: {r for p in c.parts for side in (p["lhs"], p["rhs"]) for r in side.get("rows", [])}
    headline = [c for c in claims if c.table == "Table 1 (L-MNIST)" and not c.ours]
    assert len(headline) == 5 and set().union(*map(named, headline)) == {m["row"] for m in METHODS}
    assert [c.table for c in claims].count("Table 1 (NL-MNIST)") == 7

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
    _faces(tmp_path / "data")
    tr, ev = load_dataset("CelebA", scale_config(CONTRASTIVE, "smoke"), root=tmp_path / "data")   # 6 per class, half held out
    assert len(tr.target) == len(ev.target) == 6 and sorted(ev.target.labels.tolist()) == [0, 0, 0, 1, 1, 1]
    assert len(tr.background) == len(ev.background) == 6 and tr.target.images.shape[1:] == (3, 64, 64)
    res = reproduce_contrastive("smoke", out_dir=tmp_path / "out", device="cpu", sweep=False, datasets=["AffectNet"],
                                data_root=str(tmp_path / "data"))
    assert set(res["results"]) == {"Table 1 (AffectNet)", "Table 2"} and set(res["results"]["Table 1 (AffectNet)"]) == {m["row"] for m in METHODS}
    assert res["results"]["Table 2"]["Ours (Eq. 8)"] == res["results"]["Table 1 (AffectNet)"]["Ours (Eq. 8)"]   # the same runs
    acc = res["results"]["Table 2"]["Ours (Eq. 8)"][0]
    assert all(0 <= acc[f"accuracy_{c}"] <= 1 for c in AFFECTNET_CLASSES)
    assert (tmp_path / "out" / "figure7_reconstructions_AffectNet.png").stat().st_size > 0
    assert "22.66" in (tmp_path / "out" / "report.md").read_text()          # AffectNet Eq. 8 CA_s of the paper
    assert "The faces (CelebA, AffectNet), for which A.3 names 8-layer networks" in (tmp_path / "out" / "report.md").read_text()
    ev = json.loads((tmp_path / "out" / "runs" / "AffectNet" / "ours_eq8" / "seed0" / "eval.json").read_text())["metrics"]
    assert ev["n_eval"] == 7 * 6                                              # validation: 6 per expression


def test_the_digit_split_diagnosis_scores_a_run_as_the_reproduction_does_and_reports_its_file():
    """benchmarks/diagnose_contrastive_split.py: a run (3 steps here) is scored by the reproduction's evaluation (CA in %,
    within bounds), and `--report` prints every kept run of benchmarks/contrastive_split.json with the seeds' correlation."""
    import importlib.util, io, contextlib
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "diagnose_contrastive_split.py"
    spec = importlib.util.spec_from_file_location("diagnose_contrastive_split", path)
    M = importlib.util.module_from_spec(spec); spec.loader.exec_module(M)
    r = M.train_one(dict(part="seeds", objective="contrastive_w2_dirac", seed=1, steps=3, likelihood="bernoulli"))
    assert 0 <= r["ca_s"] <= 100 and 0 <= r["ca_z"] <= 100 and r["kl_x"] >= 0 and r["precision"] in ("bf16", "fp32")
    kept = json.loads(M.OUT.read_text())["runs"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out): M.main(["--report"])
    text = out.getvalue()
    assert f"across these {sum(k.startswith('seeds/') for k in kept)} runs" in text.lower() and "| bernoulli |" in text
    for k, x in kept.items():
        if k.startswith("seeds/"): assert f"| {x['ca_s']:.1f} | {x['ca_z']:.1f} |" in text, k


def test_the_papers_networks_by_default_the_packages_a_declared_sensitivity():
    """Every scale trains Appendix A.3's networks on Grassy MNIST; `nets=package` is the former recipe, at `cpu` the length
    its curves over seeds chose (the curves kept beside the new ones); the Gaussian likelihood at `cpu` needs it; the
    faces fall back to the package's networks; the committed former reports say so."""
    import torch
    from disentbook.objectives.contrastive import ConvEncoder, GrassyDecoder, GrassyEncoder
    from disentbook.repro.contrastive import FORMER_NETS_CPU_STEPS, configure_contrastive
    from disentbook.repro.contrastive_eval import contrastive_model
    from disentbook.repro.summary import sensitivity_of
    for scale in ("smoke", "quick", "gpu", "paper"):
        assert scale_config(CONTRASTIVE, scale)["model"]["nets"] == "paper", scale
    q = scale_config(CONTRASTIVE, "quick")
    cpu = configure_contrastive({**CONTRASTIVE_SCALES["cpu"], "train": dict(q["train"])}, "cpu", dict(nets="package"))
    assert cpu["model"]["nets"] == "package" and cpu["train"]["steps"] == cpu["length"]["steps"] == FORMER_NETS_CPU_STEPS
    root = Path(__file__).resolve().parents[1]
    curves = [json.loads(f.read_text()) for f in sorted((root / "benchmarks/curves/papers/contrastive-package-nets").glob("*.json"))]
    assert len(curves) == 4 and all(c["settings"]["model"].get("nets") is None for c in curves)   # measured before the option
    assert max(c["choice"]["steps"] for c in curves) == FORMER_NETS_CPU_STEPS                    # the length they chose
    assert not (root / "benchmarks/curves/papers/contrastive").exists() or all(
        json.loads(f.read_text())["settings"]["model"]["nets"] == "paper" for f in (root / "benchmarks/curves/papers/contrastive").glob("*.json"))
    with pytest.raises(InputError, match="nets=package"): configure_contrastive(dict(cpu), "cpu", dict(likelihood="gaussian"))
    with pytest.raises(InputError, match="nets: expected one of"): configure_contrastive(dict(cpu), "cpu", dict(nets="deep"))
    g = configure_contrastive(dict(cpu), "cpu", dict(likelihood="gaussian", nets="package"))
    assert g["train"]["steps"] == 1000 and g["model"]["likelihood"] == "gaussian"
    from types import SimpleNamespace as NS
    ds = lambda px: NS(train=NS(target=NS(images=torch.zeros(2, 1, px, px))))
    m28 = contrastive_model(METHODS[0], ds(28), dict(q, dataset="L-MNIST"))
    assert isinstance(m28.z_encoder, GrassyEncoder) and isinstance(m28.decoder, GrassyDecoder) and m28.config["nets"] == "paper"
    m64 = contrastive_model(METHODS[0], ds(64), dict(q, dataset="CelebA"))
    assert isinstance(m64.z_encoder, ConvEncoder) and m64.config["nets"] == "package"
    for r in ("contrastive-cpu-package-nets", "contrastive-cpu-gaussian", "contrastive-quick", "contrastive-gpu-gaussian"):
        m = json.loads((root / "reports" / r / "metrics.json").read_text())
        assert "nets=package" in sensitivity_of(m) and m["config"]["model"].get("nets") is None, r
        assert "the package's networks" in (root / "reports" / r / "report.md").read_text(), r
