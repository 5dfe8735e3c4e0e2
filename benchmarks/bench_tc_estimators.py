"""Bias, spread and cost of the TC estimators of disentbook.tcwae against the exact value on an enumerable set.

    python benchmarks/bench_tc_estimators.py                     # N = 2000 posteriors, D = 10, batches 16..1024
    python benchmarks/bench_tc_estimators.py --n 5000 --dim 5 --reps 50 --json out.json

The "data set" is N Gaussian posteriors q(z|x_n) = N(mu_n, s^2 I) with correlated means, so the aggregate posterior is
a known mixture: its TC = E[log q(z) - sum_d log q_d(z_d)] is computed with every component (Monte Carlo over z only).
Per batch size M: the MWS estimate (Eq. 10, as is: it carries +(D-1) log N; and with that constant removed), the MSS
estimate, their mean error and standard deviation over `reps` batches, and the time of one estimate (forward only).
"""
from __future__ import annotations
import argparse, json, math, time

import torch

from disentbook.objectives.tcwae import gaussian_log_density, kl_decomposition


def exact_tc(z, mu, lv, chunk=500):
    out = []
    for zc in z.split(chunk):
        lp = gaussian_log_density(zc[:, None, :], mu[None], lv[None])
        lq = torch.logsumexp(lp.sum(2), 1) - math.log(len(mu))
        lm = (torch.logsumexp(lp, 1) - math.log(len(mu))).sum(1)
        out.append(lq - lm)
    return torch.cat(out).mean().item()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="number of posteriors N")
    ap.add_argument("--dim", type=int, default=10, help="latent dimension D")
    ap.add_argument("--std", type=float, default=0.3, help="posterior standard deviation")
    ap.add_argument("--reps", type=int, default=30, help="batches per batch size")
    ap.add_argument("--sizes", default="16,64,256,1024")
    ap.add_argument("--exact-samples", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    g = torch.Generator().manual_seed(a.seed)
    A = torch.randn(a.dim, a.dim, generator=g, dtype=torch.float64) / math.sqrt(a.dim) + torch.eye(a.dim, dtype=torch.float64)
    mu = torch.randn(a.n, a.dim, generator=g, dtype=torch.float64) @ A.T
    lv = torch.full_like(mu, 2 * math.log(a.std))
    def draw(m):
        idx = torch.randint(a.n, (m,), generator=g)
        return mu[idx] + a.std * torch.randn(m, a.dim, generator=g, dtype=torch.float64), idx
    z, _ = draw(a.exact_samples)
    t0 = time.perf_counter(); exact = exact_tc(z, mu, lv); t_exact = time.perf_counter() - t0
    const = (a.dim - 1) * math.log(a.n)
    print(f"N = {a.n}, D = {a.dim}: exact TC = {exact:.3f} nats ({a.exact_samples} samples, {t_exact:.2f} s); "
          f"(D-1) log N = {const:.3f}")
    print(f"{'M':>6} | {'MWS (Eq.10) - (D-1)logN - exact':>32} | {'MSS - exact':>18} | {'ms / estimate':>13}")
    rows = []
    for M in [int(s) for s in a.sizes.split(",")]:
        mws, mss, times = [], [], []
        for _ in range(a.reps):
            zb, idx = draw(M)
            t0 = time.perf_counter(); mws.append(kl_decomposition(zb, mu[idx], lv[idx], a.n, "mws")["tc"].item())
            times.append(time.perf_counter() - t0)
            mss.append(kl_decomposition(zb, mu[idx], lv[idx], a.n, "mss")["tc"].item())
        e1 = torch.tensor(mws) - const - exact; e2 = torch.tensor(mss) - exact
        row = dict(M=M, mws_bias=e1.mean().item(), mws_std=e1.std().item(), mss_bias=e2.mean().item(),
                   mss_std=e2.std().item(), ms=1000 * sorted(times)[len(times) // 2])
        rows.append(row)
        print(f"{M:>6} | {row['mws_bias']:>+20.3f} ± {row['mws_std']:<9.3f} | {row['mss_bias']:>+8.3f} ± {row['mss_std']:<7.3f} | {row['ms']:>13.2f}")
    if a.json:
        with open(a.json, "w") as f: json.dump(dict(args=vars(a), exact=exact, constant=const, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
