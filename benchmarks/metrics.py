"""Benchmark of disentbook.metrics against a plain numpy / scikit-learn reference written here.

On a 10-factor synthetic representation at disentanglement_lib's sizes (10,000 train / 5,000 test), computes
MIG, SAP (continuous and discrete), DCI, modularity, explicitness and IRS — and, on a synthetic ground-truth
dataset with the same 10 factors, the sampled BetaVAE and FactorVAE scores (num_train 10,000 / num_eval 5,000,
batch 64) — twice — with disentbook and with the
straightforward implementation (per-pair sklearn mutual_info_score loops, serial GradientBoostingClassifier,
per-pair np.cov, per-group masks, ...) — prints both times side by side, per metric and in total, the speed-up,
and checks that the values agree (exactly for the same learner, within DCI_TOLERANCE for DCI's fast learner,
within sampled_tolerance(num_eval) for the sampled scores, whose random draws are made in a different order).

    python benchmarks/metrics.py            # full size (the reference DCI takes minutes)
    python benchmarks/metrics.py --quick    # smoke run, small sizes
"""
import argparse, math, os, sys, time

import numpy as np
import scipy.stats
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import mutual_info_score, roc_auc_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import MultiLabelBinarizer
from sklearn.svm import LinearSVC

from disentbook.eval import metrics as M
from disentbook.eval import scores as S

SIZES = [3, 6, 10, 8, 4, 2, 5, 12, 7, 9]  # 10 factors, 66 classes in all


# ---- the plain reference --------------------------------------------------------------------------

def ref_discretize(x, num_bins=20):
    out = np.zeros(x.shape, dtype=np.int64)
    for d in range(x.shape[1]):
        out[:, d] = np.digitize(x[:, d], np.histogram(x[:, d], num_bins)[1][:-1])
    return out


def ref_mi(a, b):
    return np.array([[mutual_info_score(a[:, i], b[:, k]) for k in range(b.shape[1])] for i in range(a.shape[1])])


def ref_mig(z, f):
    m = ref_mi(ref_discretize(z), f)
    h = np.array([mutual_info_score(f[:, k], f[:, k]) for k in range(f.shape[1])])
    s = np.sort(m, axis=0)[::-1]
    return float(np.mean((s[0] - s[1]) / h))


def ref_sap(z, f, zt, ft, continuous):
    S = np.zeros((z.shape[1], f.shape[1]))
    for i in range(z.shape[1]):
        for k in range(f.shape[1]):
            if continuous:
                c = np.cov(z[:, i], f[:, k], ddof=1)
                S[i, k] = c[0, 1] ** 2 / (c[0, 0] * c[1, 1]) if c[0, 0] > 1e-12 else 0.0
            elif np.var(z[:, i]) > 1e-12:
                clf = LinearSVC(C=0.01, class_weight="balanced", random_state=0).fit(z[:, i:i + 1], f[:, k])
                S[i, k] = np.mean(clf.predict(zt[:, i:i + 1]) == ft[:, k])
    s = np.sort(S, axis=0)[::-1]
    return float(np.mean(s[0] - s[1]))


def ref_dci(z, f, zt, ft):
    R = np.zeros((z.shape[1], f.shape[1])); acc_tr, acc_te = [], []
    for k in range(f.shape[1]):
        model = GradientBoostingClassifier(random_state=0).fit(z, f[:, k])
        R[:, k] = np.abs(model.feature_importances_)
        acc_tr.append(np.mean(model.predict(z) == f[:, k])); acc_te.append(np.mean(model.predict(zt) == ft[:, k]))
    L, K = R.shape
    d_code = np.array([1 - scipy.stats.entropy(r, base=K) if r.sum() > 0 else 0.0 for r in R])
    c_fac = np.array([1 - scipy.stats.entropy(c, base=L) if c.sum() > 0 else 0.0 for c in R.T])
    return dict(disentanglement=float(d_code @ (R.sum(1) / R.sum())), completeness=float(c_fac @ (R.sum(0) / R.sum())),
                informativeness_train=float(np.mean(acc_tr)), informativeness_test=float(np.mean(acc_te)))


def ref_modularity(z, f):
    m = ref_mi(ref_discretize(z), f)
    scores = []
    for row in m:
        sq = row ** 2
        scores.append(0.0 if sq.max() == 0 else 1 - (sq.sum() - sq.max()) / (sq.max() * (len(row) - 1)))
    return float(np.mean(scores))


def ref_explicitness(z, f, zt, ft):
    mu, sd = z.mean(0), z.std(0)
    z, zt = (z - mu) / sd, (zt - mu) / sd
    tr, te = [], []
    for k in range(f.shape[1]):
        clf = OneVsRestClassifier(LogisticRegression(max_iter=1000)).fit(z, f[:, k])
        mlb = MultiLabelBinarizer(classes=clf.classes_)
        tr.append(roc_auc_score(mlb.fit_transform(f[:, k:k + 1]), clf.predict_proba(z)))
        te.append(roc_auc_score(mlb.fit_transform(ft[:, k:k + 1]), clf.predict_proba(zt)))
    return float(np.mean(tr)), float(np.mean(te))


def ref_irs(z, f, q=0.99):
    fb = ref_discretize(f)
    z = z[:, z.var(0) > 0]
    max_dev = np.max(np.abs(z - z.mean(0)), axis=0)
    cum = np.zeros((z.shape[1], f.shape[1]))
    for k in range(f.shape[1]):
        vals = np.unique(fb[:, k])
        for v in vals:
            g = z[fb[:, k] == v]
            cum[:, k] += np.percentile(np.abs(g - g.mean(0)), q * 100, axis=0)
        cum[:, k] /= len(vals)
    score = (1 - cum / max_dev[:, None]).max(1)
    return float(np.average(score, weights=max_dev))


def sampled_tolerance(num_eval: int) -> float:
    "Four standard errors of an accuracy estimated on num_eval points (worst case p = 1/2): the two implementations draw different samples."
    return 4 * math.sqrt(0.25 / num_eval)


def _obs(data, f, rng):
    return data.sample_observations_from_factors(f, rng).numpy()


def ref_beta_vae(data, represent, seed, batch_size=64, num_train=10_000, num_eval=5_000):
    "One represent call per pair batch, one Python iteration per point."
    rng, K = np.random.default_rng(seed), data.num_factors
    def points(n):
        X, Y = [], []
        for _ in range(n):
            k = rng.integers(K)
            f1 = data.sample_factors(batch_size, rng).numpy(); f2 = data.sample_factors(batch_size, rng).numpy()
            f2[:, k] = f1[:, k]
            X.append(np.mean(np.abs(represent(_obs(data, f1, rng)) - represent(_obs(data, f2, rng))), 0)); Y.append(k)
        return np.array(X), np.array(Y)
    (xtr, ytr), (xte, yte) = points(num_train), points(num_eval)
    clf = LogisticRegression(max_iter=1000).fit(xtr, ytr)
    return clf.score(xtr, ytr), clf.score(xte, yte)


def ref_factor_vae(data, represent, seed, batch_size=64, num_train=10_000, num_eval=5_000, num_var=10_000, thr=0.05):
    "Global variances once, then one represent call and one vote per point."
    rng, K = np.random.default_rng(seed), data.num_factors
    gvar = np.var(represent(_obs(data, data.sample_factors(num_var, rng).numpy(), rng)), 0, ddof=1)
    active = np.flatnonzero(np.sqrt(gvar) >= thr)
    if len(active) == 0: return 0.0, 0.0
    def votes(n):
        V = np.zeros((K, len(gvar)), dtype=np.int64)
        for _ in range(n):
            k = rng.integers(K)
            f = data.sample_factors(batch_size, rng).numpy(); f[:, k] = f[0, k]
            lv = np.var(represent(_obs(data, f, rng)), 0, ddof=1)
            V[k, active[np.argmin(lv[active] / gvar[active])]] += 1
        return V
    vtr = votes(num_train); cls = np.argmax(vtr, 0)
    vte = votes(num_eval)
    acc = lambda V: V[cls, np.arange(V.shape[1])].sum() / V.sum()
    return acc(vtr), acc(vte)


# ---- the run --------------------------------------------------------------------------------------

def timed(fn):
    t0 = time.perf_counter(); out = fn(); return out, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (1,000 / 500) for a smoke run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n_tr, n_te = (1000, 500) if args.quick else (10_000, 5_000)
    z_all, f_all = M.toy_representation(n_tr + n_te, SIZES, noise=0.2, mixing=0.3, extra_dims=2, seed=args.seed)
    z, f, zt, ft = z_all[:n_tr], f_all[:n_tr], z_all[n_tr:], f_all[n_tr:]
    print(f"{len(SIZES)} factors ({sum(SIZES)} classes), {z.shape[1]} codes, {n_tr} train / {n_te} test, "
          f"{os.cpu_count()} CPU(s)\n")

    cases = [  # name, ours, reference, how the values must agree
        ("MIG", lambda: M.mig(z, f), lambda: ref_mig(z, f), 1e-9),
        ("SAP continuous", lambda: M.sap(z, f, continuous=True), lambda: ref_sap(z, f, zt, ft, True), 1e-9),
        ("SAP discrete", lambda: M.sap(z, f, zt, ft), lambda: ref_sap(z, f, zt, ft, False), 1e-9),
        ("DCI", lambda: M.dci(z, f, zt, ft), lambda: ref_dci(z, f, zt, ft), M.DCI_TOLERANCE),
        ("modularity", lambda: M.modularity(z, f), lambda: ref_modularity(z, f), 1e-9),
        ("explicitness", lambda: M.explicitness(z, f, zt, ft), lambda: ref_explicitness(z, f, zt, ft), 1e-6),
        ("IRS", lambda: M.irs(z, f), lambda: ref_irs(z, f), 1e-9),
    ]
    # the sampled scores: observations are the factor values; the representation mixes and adds noise
    data = S.SyntheticFactors(SIZES)
    mix = np.eye(len(SIZES)) + 0.3 * np.random.default_rng(args.seed).standard_normal((len(SIZES), len(SIZES)))
    noise_rng = np.random.default_rng(args.seed + 1)
    represent = lambda x: np.asarray(x, dtype=np.float64) @ mix + 0.05 * noise_rng.standard_normal((len(x), len(SIZES)))
    kw = dict(num_train=n_tr, num_eval=n_te)
    cases += [
        ("BetaVAE score", lambda: S.beta_vae_score(data, represent, seed=args.seed, **kw),
         lambda: ref_beta_vae(data, represent, args.seed, **kw), sampled_tolerance(n_te)),
        ("FactorVAE score", lambda: S.factor_vae_score(data, represent, seed=args.seed, num_variance_estimate=n_tr, **kw),
         lambda: ref_factor_vae(data, represent, args.seed, num_var=n_tr, **kw), sampled_tolerance(n_te)),
    ]
    print(f"{'metric':16s} {'ours (s)':>9s} {'ref (s)':>9s} {'speed-up':>9s}  values (ours / reference)")
    tot_o = tot_r = 0.0; ok = True
    for name, ours, ref, tol in cases:
        vo, to = timed(ours); vr, tr = timed(ref)
        tot_o += to; tot_r += tr
        if isinstance(vo, dict):
            keys = ["disentanglement", "completeness", "informativeness_train", "informativeness_test"]
            pairs = [(k[:15], vo[k], vr[k]) for k in keys]
        elif isinstance(vo, tuple):
            pairs = [("train", vo[0], vr[0]), ("test", vo[1], vr[1])]
        else:
            pairs = [("", vo, vr)]
        agree = all(abs(a - b) <= tol for _, a, b in pairs); ok &= agree
        vals = ", ".join(f"{k + ' ' if k else ''}{a:.4f}/{b:.4f}" for k, a, b in pairs)
        print(f"{name:16s} {to:9.2f} {tr:9.2f} {tr / to:8.1f}x  {vals}  [{'agree' if agree else 'DIFFER'} within {tol:g}]",
              flush=True)
    print(f"{'total':16s} {tot_o:9.2f} {tot_r:9.2f} {tot_r / tot_o:8.1f}x")
    print("\nall values agree" if ok else "\nSOME VALUES DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
