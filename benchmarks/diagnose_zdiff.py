"""What a Z-diff score is made of: per factor, on the trained models of a dipvae reproduction.

The Z-diff score (the DIP-VAE paper's name for Higgins et al.'s BetaVAE score) is one accuracy over five factors of
dSprites (shape, scale, orientation, x, y). When one model scores above another, this script says where the difference
comes from, for every trained run of a reproduction folder (`reports/dipvae-cpu` by default, its checkpoints under
`runs/`), all on the same images:

* the Z-diff classifiers' recall per factor (the paper's SVM and the standardised SVM, on exactly the features of the
  run's own evaluation: `eval.dipvae.zdiff_classifiers` with the run's seed and the scale's point counts, so the overall
  accuracies reproduce the run's eval.json);
* how each factor is held by the code: its mutual information with its best latent and its gap to the second
  (normalised by the factor's entropy; MIG is their mean) on 10,000 fresh images;
* what DIP-VAE-I's penalty asks of the code: the covariance of the encoder means, Cov[mu(x)], its off-diagonal
  (lambda_od pushes it to 0) and its diagonal (lambda_d pushes it to 1), for every model alike.

    python3 benchmarks/diagnose_zdiff.py                                     # reports/dipvae-cpu (about 1 minute a run, 2 cores)
    python3 benchmarks/diagnose_zdiff.py reports/dipvae-quick --scale quick --rows vae,dip_vae_i_lambda_d100_lambda_od10

Writes `benchmarks/zdiff_diagnosis-<folder>.json` and a PNG beside it (per-factor recall and MI per model), and prints
one line per run and a table of the row means.
"""
from __future__ import annotations
import argparse, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FACTORS = ("shape", "scale", "orientation", "x", "y")


def diagnose_run(ckpt: Path, seed: int, data, zdiff: dict, images, factors, lambdas: dict | None) -> dict:
    "Per-factor Z-diff recall, per-factor MI with the best latents, and Cov[mu] of one trained run."
    import numpy as np
    from disentbook.training.checkpoints import load_model
    from disentbook.eval import dipvae as dip
    from disentbook.eval.metrics import discretize, entropy, mutual_info
    from disentbook.eval.scores import encode_means
    model = load_model(ckpt, device="cpu")
    rep = lambda x: encode_means(model, x)
    zc = dip.zdiff_classifiers(data, rep, seed=seed, **zdiff)      # the run's own evaluation, per factor too
    out = dict(checkpoint=str(ckpt.relative_to(ROOT)) if ckpt.is_relative_to(ROOT) else str(ckpt), seed=seed)
    for name in ("svm", "svm_standardized"):
        out[f"zdiff_{name}"] = 100 * zc[name]
        # the labels are dSprites' factor indices: 0 is the constant colour, 1-5 the five factors
        out[f"recall_{name}"] = {f: 100 * zc[f"{name}_recall"].get(i, float("nan")) for i, f in enumerate(FACTORS, start=1)}
    mu = np.asarray(rep(images), dtype=np.float64)
    f = np.asarray(factors)[:, 1:]                                  # colour is constant: shape, scale, orientation, x, y
    mi = mutual_info(discretize(mu), f)                            # (latents, factors)
    h = entropy(f)
    srt = np.sort(mi, axis=0)[::-1]
    out["mi_best"] = {k: float(srt[0, i] / h[i]) for i, k in enumerate(FACTORS)}
    out["mi_gap"] = {k: float((srt[0, i] - srt[1, i]) / h[i]) for i, k in enumerate(FACTORS)}
    out["best_latent"] = {k: int(mi[:, i].argmax()) for i, k in enumerate(FACTORS)}
    out["mig"] = float(np.mean(list(out["mi_gap"].values())))
    cov = np.cov(mu, rowvar=False)
    off = cov - np.diag(np.diag(cov))
    out["cov_offdiag_sq_sum"] = float((off ** 2).sum())
    out["cov_diag_minus1_sq_sum"] = float(((np.diag(cov) - 1) ** 2).sum())
    out["cov_diag"] = [float(v) for v in np.diag(cov)]
    sd = np.sqrt(np.maximum(np.diag(cov), 1e-12))
    corr = off / sd[:, None] / sd[None, :]
    active = np.diag(cov) > 0.01
    a = np.abs(corr[np.ix_(active, active)])
    out["active_latents"] = int(active.sum())
    out["max_abs_corr_active"] = float(a.max()) if active.sum() > 1 else 0.0
    if lambdas:
        out["dip_i_penalty"] = lambdas["lambda_od"] * out["cov_offdiag_sq_sum"] + lambdas["lambda_d"] * out["cov_diag_minus1_sq_sum"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default="reports/dipvae-cpu")
    ap.add_argument("--scale", default="cpu", help="the folder's scale (its Z-diff point counts)")
    ap.add_argument("--n", type=int, default=10_000, help="fresh images for MI and the covariance")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", default="", help="these rows only (folder names, comma-separated)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", action="store_true",
                    help="also put the row means, as one note, in the folder's metrics.json (its report shows it after "
                         "`disentbook reproduce dipvae --rejudge --out FOLDER`)")
    a = ap.parse_args(argv)
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    from disentbook.core import make_generator
    from disentbook.data.dsprites import DSprites
    from disentbook.repro.dipvae import DIPVAE_SCALES
    folder = (ROOT / a.folder) if not Path(a.folder).is_absolute() else Path(a.folder)
    runs = sorted(folder.glob("runs/dsprites/*/seed*/train/checkpoint"))
    if a.rows: runs = [r for r in runs if r.parents[2].name in a.rows.split(",")]
    if not runs:
        print(f"diagnose_zdiff: no trained runs under {a.folder}/runs/dsprites (run the reproduction first)"); return 2
    zdiff = DIPVAE_SCALES[a.scale]["eval"]["zdiff"]
    data = DSprites()
    images, factors = data.sample(a.n, make_generator(424242))
    rows, t0 = [], time.time()
    for ck in runs:
        run = ck.parents[1]
        ev = json.loads((run / "eval.json").read_text()) if (run / "eval.json").exists() else {}
        spec = ev.get("spec", {})
        lam = spec.get("params") if spec.get("objective") == "dip_vae_i" else None
        seed = int(run.name.removeprefix("seed"))
        t = time.time()
        r = diagnose_run(ck, seed, data, zdiff, images, factors, lam)
        r.update(row=run.parent.name, label=spec.get("row", run.parent.name), objective=spec.get("objective"), eval_zdiff=ev.get("metrics", {}).get("zdiff"),
                 seconds=round(time.time() - t, 1))
        rows.append(r)
        rec = " ".join(f"{k[:5]} {v:5.1f}" for k, v in r["recall_svm"].items())
        print(f"{r['row']:<36} seed {seed}: Z-diff {r['zdiff_svm']:5.1f} (eval.json {r['eval_zdiff'] if r['eval_zdiff'] is None else round(r['eval_zdiff'], 1)}) | recall {rec} | "
              f"MIG {r['mig']:.3f} | offdiag² {r['cov_offdiag_sq_sum']:.3f} diag-1² {r['cov_diag_minus1_sq_sum']:.2f}", flush=True)
    summary = {}
    for row in dict.fromkeys(r["row"] for r in rows):
        rs = [r for r in rows if r["row"] == row]
        m = lambda key: float(np.mean([r[key] for r in rs]))
        md = lambda key: {k: float(np.mean([r[key][k] for r in rs])) for k in FACTORS}
        summary[row] = dict(label=rs[0]["label"], seeds=len(rs), zdiff_svm=m("zdiff_svm"), zdiff_svm_standardized=m("zdiff_svm_standardized"),
                            recall_svm=md("recall_svm"), recall_svm_standardized=md("recall_svm_standardized"),
                            mi_best=md("mi_best"), mi_gap=md("mi_gap"), mig=m("mig"),
                            cov_offdiag_sq_sum=m("cov_offdiag_sq_sum"), cov_diag_minus1_sq_sum=m("cov_diag_minus1_sq_sum"),
                            max_abs_corr_active=m("max_abs_corr_active"))
    print("\nrow means | Z-diff (paper's SVM, standardised) | recall per factor, paper's SVM | best-latent MI / H per factor")
    for row, s in summary.items():
        print(f"{row:<36} {s['zdiff_svm']:5.1f} {s['zdiff_svm_standardized']:5.1f} | "
              + " ".join(f"{v:5.1f}" for v in s["recall_svm"].values()) + " | "
              + " ".join(f"{v:.2f}" for v in s["mi_best"].values()))
    result = dict(what=__doc__.splitlines()[0], folder=a.folder, scale=a.scale, zdiff_points=zdiff, n_images=a.n,
                  factors=FACTORS, runs=rows, row_means=summary, seconds=round(time.time() - t0, 1),
                  machine=dict(cpu=platform.processor() or platform.machine(), threads=a.threads, torch=torch.__version__))
    result["note"] = note_text(summary)
    print("\n" + result["note"])
    if a.note:
        f = folder / "metrics.json"
        if not f.exists(): print(f"diagnose_zdiff: {a.folder} has no metrics.json (the reproduction has not finished): no note written"); return 2
        m = json.loads(f.read_text())
        m["notes"] = [n for n in m.get("notes", []) if not str(n).startswith(NOTE_HEAD)] + [result["note"]]
        tmp = f.with_suffix(".json.tmp"); tmp.write_text(json.dumps(m, indent=1) + "\n"); tmp.replace(f)
        print(f"note added to {f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}")
    if not a.no_write:
        out = ROOT / "benchmarks" / f"zdiff_diagnosis-{folder.name}.json"
        out.write_text(json.dumps(result, indent=1) + "\n")
        _figure(summary, out.with_suffix(".png"), folder.name)
        print(f"wrote {out.relative_to(ROOT)} and {out.with_suffix('.png').relative_to(ROOT)}")
    return 0


NOTE_HEAD = "Z-diff per factor"


def note_text(summary: dict) -> str:
    "The row means as one sentence a report can carry."
    per = lambda key, fmt: "; ".join(f"{s['label']} " + " / ".join(fmt(v) for v in s[key].values()) for s in summary.values())
    pct, frac = (lambda v: f"{v:.0f}"), (lambda v: f"{v:.2f}")
    return (f"{NOTE_HEAD} ({' / '.join(FACTORS)}), measured afterwards from the runs' checkpoints with "
            f"`benchmarks/diagnose_zdiff.py` (seed means): the paper's SVM's recall on each run's own evaluation features, "
            f"{per('recall_svm', pct)} %; the standardised SVM's, {per('recall_svm_standardized', pct)} %; each factor's "
            f"mutual information with its best latent over the factor's entropy (10,000 fresh images), "
            f"{per('mi_best', frac)}. Cov[mu(x)] of the encoder means (DIP-VAE-I's penalty drives its off-diagonal to 0 and "
            f"its diagonal to 1): sum of squared off-diagonal entries "
            + ", ".join(f"{s['label']} {s['cov_offdiag_sq_sum']:.3f}" for s in summary.values())
            + "; sum of squared (diagonal - 1) "
            + ", ".join(f"{s['label']} {s['cov_diag_minus1_sq_sum']:.2f}" for s in summary.values()) + ".")


def _figure(summary: dict, path: Path, title: str):
    import numpy as np
    from matplotlib.figure import Figure
    fig = Figure(figsize=(11, 3.8), dpi=100)
    panels = (("recall_svm", "Z-diff recall per factor, paper's SVM (%)"),
              ("recall_svm_standardized", "recall, standardised SVM (%)"), ("mi_best", "best latent's MI / H(factor)"))
    w = 0.8 / max(1, len(summary))
    for i, (key, name) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        for j, (row, s) in enumerate(summary.items()):
            ax.bar(np.arange(len(FACTORS)) + j * w, list(s[key].values()), w, label=f"{s['label']} ({s['seeds']} seeds)")
        ax.set_xticks(np.arange(len(FACTORS)) + w * (len(summary) - 1) / 2, FACTORS, fontsize=8); ax.set_title(name, fontsize=9)
        if i == 0: ax.legend(fontsize=6)
    fig.suptitle(f"What the Z-diff scores are made of ({title}; seed means)", fontsize=10); fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
