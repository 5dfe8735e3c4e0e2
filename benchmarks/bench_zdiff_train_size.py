"""Why the DIP-VAE paper's Z-diff classifier can predict one factor: its training-set size.

The paper fits a one-vs-rest linear SVM with C = 0.01 on the Z-diff features. sklearn's `LinearSVC` minimises
0.5 |w|^2 + C * sum of hinge losses over the training points, so the data term grows with the number of points: with few
points the regulariser wins and the classifier predicts one factor for every input (its score is then that factor's
share of the evaluation points). This script measures the score against the number of training points on the models of
the dipvae learning curves, seed 0 (the checkpoints the campaign's `curves-dipvae-seeds` stage keeps under
`results/campaign/papers/dipvae/`, at the length each run reached), with the same features scored by the SVM after standardisation and by a
logistic regression (`eval.dipvae.zdiff_classifiers`, seed 0: the same numbers on every call).

    python3 benchmarks/bench_zdiff_train_size.py                    # three rows x three sizes (about 13 minutes, 2 cores)
    python3 benchmarks/bench_zdiff_train_size.py --sizes 300:150 --rows vae

Writes `benchmarks/zdiff_train_size.json` (unless `--no-write`) and prints one line per row and size.
"""
from __future__ import annotations
import argparse, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "zdiff_train_size.json"
ROWS = ("vae", "beta_vae_beta4", "dip_vae_i_lambda_d100_lambda_od10")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300:150,1000:500,3000:1000", help="train:eval point counts, comma-separated")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"rows of the dipvae curves (from {', '.join(ROWS)})")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    import torch
    torch.set_num_threads(a.threads)
    from disentbook.campaign.papers import PaperRow
    from disentbook.repro.runs import build_trainer
    from disentbook.eval import dipvae as dip
    from disentbook.eval.scores import encode_means
    sizes = [tuple(int(v) for v in s.split(":")) for s in a.sizes.split(",")]
    rows = a.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad: sys.exit(f"bench_zdiff_train_size: unknown row(s) {bad}; known: {', '.join(ROWS)}")
    out = dict(machine=dict(cpu=platform.processor() or platform.machine(), threads=a.threads, torch=torch.__version__),
               classifier="LinearSVC(C=0.01, hinge, one-vs-rest) on raw Z-diff features, batch of 64 pairs per point, seed 0",
               results=[])
    for slug in rows:
        row = PaperRow("dipvae", slug)
        if not (row.run_dir(ROOT, 0) / "checkpoint" / "config.json").is_file():
            sys.exit(f"bench_zdiff_train_size: no checkpoint of {slug} under {row.run_dir(ROOT, 0).relative_to(ROOT)} (run "
                     "python3 -m disentbook campaign --stage curves-dipvae-seeds first)")
        trainer, data, _ = build_trainer(row.job(ROOT, 0))
        model, steps = trainer.model.eval(), trainer.step
        for n_train, n_eval in sizes:
            t0 = time.monotonic()
            with torch.no_grad():
                zc = dip.zdiff_classifiers(data, lambda x: encode_means(model, x), seed=0, batch_size=64,
                                           num_train=n_train, num_eval=n_eval)
            r = dict(row=slug, steps=steps, num_train=n_train, num_eval=n_eval,
                     **{k: round(float(v), 4) for k, v in zc.items() if isinstance(v, (int, float))},
                     seconds=round(time.monotonic() - t0, 1))
            out["results"].append(r)
            print(f"{slug} at {steps:,} steps, {n_train:,} / {n_eval:,} points: paper's SVM {100 * r['svm']:.1f} % "
                  f"(train {100 * r['svm_train']:.1f} %), standardised {100 * r['svm_standardized']:.1f} %, "
                  f"logistic {100 * r['logistic']:.1f} % ({r['seconds']:.0f} s)", flush=True)
    if not a.no_write: OUT.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
