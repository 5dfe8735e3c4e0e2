"""Where the captured ensemble's step spends its time on a GPU, and how fast the alternatives are: one call of a few
minutes, every number measured in the same process.

    python benchmarks/bench_engine_variants.py --out results/bench_engine_variants.json      # on CUDA
    python benchmarks/bench_engine_variants.py --device cpu --tiny                            # anywhere: every path, tiny

Rows (aggregate images/s over the K members, median of `--repeats` windows of `--window` steps, bf16 autocast, with
the peak memory per member), for the conv64 dSprites model the reproductions build (10 latents, Bernoulli decoder):

- `vmap_grouped`: the engine as it is (`Ensemble`, captured, rng='exact': each member's batch and noise from its own
  generators, the numbers of its separate run), its convolutions under vmap one grouped channels-last convolution
  (`convs='grouped'`, `nets.MemberConv2d`); `vmap`: the same with PyTorch's own batching rule (`convs='vmap'`); `vmap_fast`: rng='fast' (one batch of K x B and one noise draw for all members);
  `vmap_b128` / `vmap_b256`: larger per-member batches.
- the step taken apart: `inputs_only` (the host side of a step: the K members' draws, stacking, nothing trained) and
  `replay_only` (the captured graph replayed on fixed inputs: forward, backward and the fused Adam, no draw).
- `grouped` (beta-VAE): the same network and loss written for K members at once, the members folded into the channels of
  grouped convolutions and batched matrix products (no vmap), its fused Adam, captured as one CUDA graph; the batch is one
  draw of K x B (as rng='fast'); `_cl`: channels-last activations; `_compile`: the loss through `torch.compile`;
  `_b256`: batch 256 per member.
- `--beyond`: the engine's step profiled (its kernels by device time), the engine at batch 128 and 256 per member, the
  grouped step compiled and channels-last at batch 256, and with `max-autotune-no-cudagraphs`.

Checks (strict fp32, TF32 off): each member of the ensemble (both `convs`) against its separate `Trainer` run, trained
`--check-steps` steps, loss history and weights (the largest differences, and whether they are within the engine tests'
tolerances); the hand-written grouped step's per-member loss and gradients against the vmapped step's on the same
weights, batch and noise; then both trained `--check-steps` steps on the same draws, each member's loss history and
weights compared with the engine tests' tolerances (rtol 1e-4 / atol 1e-4 on the history, atol 1e-3 / rtol 1e-3 on
the weights).

The JSON (`--out`) is rewritten after every row, so a run cut at a time limit keeps what it measured; `--budget` seconds
skips the rows left once it is spent. A CPU run (or `--tiny`) only rehearses the paths: its numbers say nothing about
a GPU.
"""
from __future__ import annotations
import argparse, datetime, json, statistics, sys, time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disentbook.data.dsprites import DSprites  # noqa: E402
from disentbook.training.ensemble import Ensemble  # noqa: E402
from disentbook.training.run import build_run, run_specs
from disentbook.repro.declare import PAPERS  # noqa: E402
from disentbook.repro.runs import default_model, sampler_fn  # noqa: E402
from disentbook.training.config import TrainConfig, precision_flags  # noqa: E402

METHODS = {"beta_vae": dict(beta=4.0), "factor_vae": dict(gamma=35.0)}


def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize(dev)


def peak_mib(dev) -> float | None:
    return torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None


def reset_peak(dev):
    if dev.type == "cuda": torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(dev)


# ---------------------------------------------------------------- the grouped beta-VAE
CONV = [f"model.encoder.conv.{i}" for i in (0, 2, 4, 6)]
ENC_FC = [f"model.encoder.fc.{i}" for i in (0, 2)]
DEC_FC = [f"model.decoder.fc.{i}" for i in (0, 2)]
DECONV = [f"model.decoder.deconv.{i}" for i in (0, 2, 4, 6)]


def grouped_forward(P: dict, x: torch.Tensor, eps: torch.Tensor, beta: torch.Tensor, c0: int, base: int,
                    channels_last: bool = False) -> torch.Tensor:
    """The beta-VAE loss of K members at once, `(K,)`: `x (K, B, C, H, W)` float images, `eps (K, B, L)` the
    reparameterisation noise, `P` the stacked weights (`Ensemble.params` names, leading member axis)."""
    K, B, C, H, W = x.shape
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    h = x.transpose(0, 1).reshape(B, K * C, H, W).contiguous(memory_format=fmt)
    for n in CONV:
        w, b = P[n + ".weight"], P[n + ".bias"]
        h = F.relu(F.conv2d(h, w.reshape(-1, *w.shape[2:]), b.reshape(-1), stride=2, padding=1, groups=K))
    h = h.reshape(B, K, -1).transpose(0, 1)                                    # (K, B, C*h*w), nn.Flatten's order
    for i, n in enumerate(ENC_FC):
        h = torch.baddbmm(P[n + ".bias"].unsqueeze(1), h, P[n + ".weight"].transpose(1, 2))
        if i < len(ENC_FC) - 1: h = F.relu(h)
    mu, logvar = h.chunk(2, dim=2)
    z = mu + torch.exp(0.5 * logvar) * eps.to(mu.dtype)
    h = z
    for n in DEC_FC:
        h = F.relu(torch.baddbmm(P[n + ".bias"].unsqueeze(1), h, P[n + ".weight"].transpose(1, 2)))
    h = h.transpose(0, 1).reshape(B, K * c0, base, base).contiguous(memory_format=fmt)
    for i, n in enumerate(DECONV):
        w, b = P[n + ".weight"], P[n + ".bias"]
        h = F.conv_transpose2d(h, w.reshape(-1, *w.shape[2:]), b.reshape(-1), stride=2, padding=1, groups=K)
        if i < len(DECONV) - 1: h = F.relu(h)
    logits = h.reshape(B, K, C, H, W).transpose(0, 1)
    recon = F.binary_cross_entropy_with_logits(logits.float(), x, reduction="none").flatten(2).sum(2).mean(1)
    mu, logvar = mu.float(), logvar.float()
    kl = (0.5 * (mu.pow(2) + logvar.exp() - logvar - 1)).mean(1).sum(1)
    return recon + beta * kl


class Grouped:
    """K beta-VAE members as one grouped network: own copies of the ensemble's stacked weights, one fused Adam, the step
    captured as one CUDA graph on CUDA (eager elsewhere)."""
    def __init__(self, ens: Ensemble, channels_last=False, compile=False, batch=None, capture=True):
        t0, self.dev = ens.trainers[0], ens.device
        self.K, self.B = ens.K, batch or ens.config.batch_size
        self.P = {n: p.detach().clone().requires_grad_(True) for n, p in ens.params.items() if ens.role[n] == "main"}
        beta = ens.hparams.get("beta")
        self.beta = beta.clone() if beta is not None else torch.full((self.K,), float(t0.objective.beta), device=self.dev)
        s = {k: t0.optimizer.param_groups[0][k] for k in ("lr", "betas", "eps", "weight_decay")}
        self.opt = torch.optim.Adam(list(self.P.values()), **s, **(dict(fused=True, capturable=True)
                                                                  if self.dev.type == "cuda" else {}))
        m = t0.model
        self.c0, self.base, self.L, self.shape = m.decoder.c0, m.decoder.base, m.latent_dim, m.shape
        self.sampler, self.gen = t0.sampler, torch.Generator(self.dev); self.gen.manual_seed(1234)
        self.cl = channels_last
        mode = compile if isinstance(compile, str) else None
        self.fn = torch.compile(grouped_forward, dynamic=False, mode=mode) if compile else grouped_forward
        self.capture = capture and self.dev.type == "cuda"
        self.graph, self.static = None, None

    def loss(self, x, eps):
        with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=self.dev.type == "cuda" and self.amp):
            return self.fn(self.P, x, eps, self.beta, self.c0, self.base, self.cl)

    amp = True

    def body(self, x, eps):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(x, eps)
        loss.sum().backward()
        self.opt.step()
        return loss.detach()

    def draw(self):
        b = self.sampler.sample(self.K * self.B, self.gen)["x"]
        x = b.reshape(self.K, self.B, *b.shape[1:])
        eps = torch.randn(self.K, self.B, self.L, generator=self.gen, device=self.dev)
        return x, eps

    def step(self, inputs=None):
        x, eps = inputs if inputs is not None else self.draw()
        if not self.capture: return self.body(x, eps)
        if self.static is None:
            self.static = (x.clone(), eps.clone())
            st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                for _ in range(3): self.body(*self.static)
            torch.cuda.current_stream().wait_stream(st)
            self.opt.zero_grad(set_to_none=True)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph): self.out = self.body(*self.static)
        self.static[0].copy_(x); self.static[1].copy_(eps)
        self.graph.replay()
        return self.out.clone()

    def fit(self, n):
        for _ in range(n): self.step()


# ---------------------------------------------------------------- the bench
class Bench:
    def __init__(self, a, dev):
        self.a, self.dev = a, dev
        self.data = DSprites()
        self.sampler = sampler_fn(PAPERS["vae"], self.data)(dev)
        with torch.random.fork_rng(devices=[]):
            self.mc = default_model(dict(objective="beta_vae", params={}), self.data, dict(model=dict(latent_dim=10))).config
        self.t_start = time.perf_counter()
        self.res = dict(device=(torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"),
                        torch=torch.__version__, date=f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                        command="python benchmarks/bench_engine_variants.py " + " ".join(sys.argv[1:]),
                        tiny=bool(a.tiny), window=a.window, repeats=a.repeats, rows=[], checks=[], skipped=[])

    def left(self) -> float: return self.a.budget - (time.perf_counter() - self.t_start)

    def save(self):
        self.res["seconds"] = round(time.perf_counter() - self.t_start, 1)
        if self.a.out:
            Path(self.a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(self.a.out).write_text(json.dumps(self.res, indent=1) + "\n")

    def config(self, batch=None, precision="bf16") -> TrainConfig:
        return TrainConfig(steps=10**9, batch_size=batch or self.a.batch, lr=5e-4, log_every=self.a.window, ckpt_every=0,
                           device=str(self.dev), amp=precision == "bf16" and self.dev.type == "cuda", progress=False)

    def ensemble(self, method, k, batch=None, precision="bf16", **kw) -> Ensemble:
        ts = [build_run(run_specs([dict(objective=method, params=METHODS[method], seed=i)], self.mc, self.config(batch, precision))[0], self.sampler, data=self.data, device=self.dev, resume=False) for i in range(k)]
        return Ensemble(ts, precision=precision, **kw)

    def timed(self, step, n_images_per_step, warm=None) -> dict:
        "Warm-up, then `repeats` windows of `window` calls of `step`; images/s median, min, max."
        a = self.a
        for _ in range(a.warm if warm is None else warm): step()
        sync(self.dev)
        xs = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.window): step()
            sync(self.dev); xs.append(a.window * n_images_per_step / (time.perf_counter() - t0))
        return dict(images_per_s=round(statistics.median(xs), 1), min=round(min(xs), 1), max=round(max(xs), 1))

    def row(self, name, method, k, batch, make, note=""):
        if self.left() < 0:
            self.res["skipped"].append(f"{name} {method} K={k}: the budget was spent"); print(f"skip {name} K={k}"); return None
        reset_peak(self.dev)
        t0 = time.perf_counter()
        try:
            with precision_flags("bf16", self.dev):
                r = make()
        except Exception as e:             # one variant failing says so in its row; the others are still measured
            r = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
        mem = peak_mib(self.dev)
        r = dict(variant=name, method=method, K=k, batch=batch, **r, seconds=round(time.perf_counter() - t0, 1),
                 memory_per_member_mib=round(mem / k, 1) if mem else None, note=note)
        self.res["rows"].append(r); self.save()
        print(f"{name:<18} {method:<10} K={k:<4} B={batch:<4} " + (f"{r['images_per_s']:>12,.0f} images/s"
              if "images_per_s" in r else r.get("error", "")) + f"  ({r['seconds']} s)", flush=True)
        return r

    # ---- rows
    def vmap_rows(self, method, k, parts=True):
        B = self.a.batch
        def full(rng="exact", batch=B, convs="grouped"):
            ens = self.ensemble(method, k, batch, rng=rng, capture=self.dev.type == "cuda" or None, convs=convs)
            r = self.timed(lambda: ens.train_step(), k * batch)
            return r | dict(mode=ens.mode)
        self.row("vmap_grouped", method, k, B, full, "the engine's default")
        self.row("vmap", method, k, B, lambda: full(convs="vmap"), "convs='vmap': PyTorch's batching rule")
        if not parts: return
        def inputs_only():
            ens = self.ensemble(method, k, B, capture=False)
            return self.timed(lambda: ens._inputs(), k * B)
        self.row("inputs_only", method, k, B, inputs_only, "the host side of a step alone: K draws, stacked")
        def replay_only():
            ens = self.ensemble(method, k, B, capture=self.dev.type == "cuda" or None)
            for _ in range(ens.warmup + 2): ens.train_step()
            if ens._graph is None: return dict(error=f"not captured ({ens.reason})")
            return self.timed(lambda: ens._graph.replay(), k * B)
        if self.dev.type == "cuda": self.row("replay_only", method, k, B, replay_only, "the captured graph alone, fixed inputs")
        self.row("vmap_fast", method, k, B, lambda: full("fast"), "rng='fast': one batch and one noise draw for all")

    def vmap_batch_rows(self, method, k, batch, convs="vmap"):
        def full():
            ens = self.ensemble(method, k, batch, capture=self.dev.type == "cuda" or None, convs=convs)
            return self.timed(lambda: ens.train_step(), k * batch)
        self.row(f"vmap{'_grouped' if convs == 'grouped' else ''}_b{batch}", method, k, batch, full)

    def grouped_row(self, k, cl=False, comp=False, batch=None):
        batch = batch or self.a.batch
        name = "grouped" + ("_cl" if cl else "") + ("_compile" if comp else "") + (f"-{comp}" if isinstance(comp, str) else "") \
            + (f"_b{batch}" if batch != self.a.batch else "")
        def make():
            ens = self.ensemble("beta_vae", k, batch, capture=False)
            g = Grouped(ens, channels_last=cl, compile=comp)
            del ens
            return self.timed(lambda: g.step(), k * batch)
        self.row(name, "beta_vae", k, batch, make, "one draw of K x B for all members" + (", torch.compile" if comp else ""))

    def profile(self, method, k, steps=3):
        "The step's kernels by device time (eager steps of the engine's ensemble, after warm-up): where a replay's time goes."
        out = dict(check=f"profile of {steps} eager steps ({method}, K = {k}, bf16)", method=method, K=k)
        try:
            from torch.profiler import ProfilerActivity, profile
            with precision_flags("bf16", self.dev):
                ens = self.ensemble(method, k, self.a.batch, capture=False)
                for _ in range(2): ens.train_step()
                sync(self.dev)
                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.dev.type == "cuda" else [])
                with profile(activities=acts) as prof:
                    for _ in range(steps): ens.train_step()
                    sync(self.dev)
            key = "self_device_time_total" if self.dev.type == "cuda" else "self_cpu_time_total"
            ev = [e for e in prof.key_averages() if getattr(e, key, 0) > 0]
            total = sum(getattr(e, key) for e in ev) or 1.0
            top = sorted(ev, key=lambda e: -getattr(e, key))[:20]
            out.update(total_ms_per_step=round(total / 1000 / steps, 3),
                       kernels=[dict(name=e.key[:120], share=round(getattr(e, key) / total, 4), calls=int(e.count) // steps)
                                for e in top])
        except Exception as e:
            out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        self.res["checks"].append(out); self.save()
        print("profile:", json.dumps({k: v for k, v in out.items() if k != "kernels"}), flush=True)
        for r in out.get("kernels", [])[:12]: print(f"  {r['share']:6.1%}  x{r['calls']:<4} {r['name']}", flush=True)

    # ---- checks
    def check_separate(self, method, k):
        "Strict fp32: each ensemble member (convs 'vmap' and 'grouped') against its separate Trainer run."
        for convs in ("vmap", "grouped"):
            out = dict(check=f"ensemble members vs separate runs (fp32, convs={convs!r})", method=method, K=k)
            try:
                with precision_flags("fp32", self.dev):
                    ens = self.ensemble(method, k, self.a.batch, precision="fp32", capture=self.dev.type == "cuda" or None,
                                        convs=convs)
                    for _ in range(self.a.check_steps): ens.train_step()
                    he = torch.stack(list(ens._rows))[:, :, ens.keys.index("loss")]
                    hd, wd = [], []
                    for i in range(k):
                        t = build_run(run_specs([dict(objective=method, params=METHODS[method], seed=i)], self.mc, self.config(None, "fp32"))[0], self.sampler, data=self.data, device=self.dev, resume=False)
                        for _ in range(self.a.check_steps): t.train_step()
                        h = torch.stack(list(t._rows))[:, t.keys.index("loss")]
                        hd.append(float((h - he[:, i]).abs().max()))
                        named = dict(ens.pairs[0].named_parameters())
                        wd.append(max(float((p.detach() - ens.params[n][i]).abs().max())
                                      for n, p in zip(named, list(t.model.parameters()) + list(t.objective.parameters()))))
                    out.update(steps=self.a.check_steps, mode=ens.mode, history_max_abs=max(hd), weights_max_abs=max(wd),
                               per_member_history_max_abs=[round(x, 6) for x in hd])
            except Exception as e:
                out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            self.res["checks"].append(out); self.save()
            print("check:", json.dumps(out), flush=True)

    def check_grouped(self, k):
        "Strict fp32: one step's loss and gradients, then a short training, the grouped step against the vmapped step."
        out = dict(check="grouped vs vmap (fp32)", K=k)
        try:
            with precision_flags("fp32", self.dev):
                ens = self.ensemble("beta_vae", k, self.a.batch, precision="fp32", capture=False)
                g = Grouped(ens, capture=False); g.amp = False
                batch, noise = ens._inputs()
                P = {n: p for n, p in ens.params.items()}
                inputs = P | ens.buffers
                lv = ens._fn(None, ens.step)(ens.hparams, inputs, batch, noise[None])["loss"]
                names = [n for n in P if ens.role[n] == "main"]
                gv = torch.autograd.grad(lv.sum(), [P[n] for n in names])
                lg = grouped_forward({n: P[n] for n in names}, batch["x"], noise[None][0], g.beta, g.c0, g.base)
                gg = torch.autograd.grad(lg.sum(), [P[n] for n in names])
                out["loss_max_rel"] = float(((lv - lg).abs() / lv.abs()).max())
                out["grad_max_rel"] = max(float((a - b).norm() / a.norm()) for a, b in zip(gv, gg))
                # a short training on the same draws
                seen = []
                draw = ens._inputs
                ens._inputs = lambda: seen.append(draw()) or seen[-1]
                for _ in range(self.a.check_steps): ens.train_step()
                hv = torch.stack(list(ens._rows))[:, :, ens.keys.index("loss")] if ens.keys else None
                hg = torch.stack([g.step((b["x"], nz[None][0])) for b, nz in seen])
                out["history_max_abs"] = float((hv - hg).abs().max()) if hv is not None else None
                out["history_close"] = bool(torch.allclose(hv, hg, rtol=1e-4, atol=1e-4)) if hv is not None else None
                out["weights_max_abs"] = max(float((ens.params[n] - g.P[n]).abs().max()) for n in names)
                out["weights_close"] = all(torch.allclose(ens.params[n], g.P[n], rtol=1e-3, atol=1e-3) for n in names)
                out["steps"] = self.a.check_steps
                out["ok"] = bool(out["loss_max_rel"] < 1e-4 and out["grad_max_rel"] < 1e-3 and out["weights_close"]
                                 and out["history_close"] is not False)
        except Exception as e:
            out["error"] = f"{type(e).__name__}: {str(e)[:300]}"; out["ok"] = False
        self.res["checks"].append(out); self.save()
        print("check:", json.dumps(out), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny windows and K (a rehearsal of every path)")
    ap.add_argument("--ks", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--warm", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--check-steps", type=int, default=30)
    ap.add_argument("--budget", type=float, default=420, help="seconds; rows left when it is spent are skipped")
    ap.add_argument("--adopted", action="store_true", help="only the checks and the engine's rows (both convs)")
    ap.add_argument("--beyond", action="store_true", help="the next questions: where the engine's step spends its device "
                    "time (profile), and the combinations not measured yet (compiled channels-last at batch 256, "
                    "max-autotune, the engine at larger batches)")
    ap.add_argument("--out", default=None, help="the JSON (default results/bench_engine_variants-<device>.json)")
    a = ap.parse_args(argv)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("bench_engine_variants.py: error: no CUDA device here; rehearse with --device cpu --tiny", file=sys.stderr)
        return 2
    if a.tiny: a.ks, a.window, a.warm, a.repeats, a.batch, a.check_steps = [2], 2, 1, 1, 8, 3
    a.out = a.out or str(ROOT / "results" / f"bench_engine_variants-{dev.type}.json")
    b = Bench(a, dev)
    ks = a.ks
    b.check_separate("beta_vae", min(ks[0], 8))
    if a.adopted:
        for k in ks[:2]: b.vmap_rows("beta_vae", k, parts=False)
        for k in ks[:2]: b.vmap_rows("factor_vae", k, parts=False)
        b.check_separate("factor_vae", min(ks[0], 4))
        b.save(); print(f"written: {a.out} ({b.res['seconds']} s)")
        return 0
    if a.beyond:
        k0 = ks[0]
        b.profile("beta_vae", k0); b.profile("factor_vae", k0)
        b.vmap_batch_rows("beta_vae", k0, 4 * a.batch, "grouped")
        b.vmap_batch_rows("beta_vae", ks[1] if len(ks) > 1 else k0, 2 * a.batch, "grouped")
        b.grouped_row(k0, cl=True, comp=True, batch=4 * a.batch)
        b.grouped_row(k0, cl=True, comp="max-autotune-no-cudagraphs")
        b.save(); print(f"written: {a.out} ({b.res['seconds']} s)")
        return 0
    b.check_grouped(min(ks[0], 8))
    for k in ks[:2]:                                   # the step taken apart, beta-VAE then FactorVAE
        b.vmap_rows("beta_vae", k)
        b.grouped_row(k); b.grouped_row(k, cl=True)
    for k in ks[:2]: b.vmap_rows("factor_vae", k)
    k0 = ks[0]
    b.grouped_row(k0, batch=4 * a.batch); b.grouped_row(k0, cl=True, batch=4 * a.batch)
    b.vmap_batch_rows("beta_vae", k0, 4 * a.batch)
    for k in ks[2:]: b.vmap_rows("beta_vae", k); b.grouped_row(k); b.grouped_row(k, cl=True)
    b.grouped_row(k0, comp=True); b.grouped_row(k0, cl=True, comp=True)
    b.save()
    print(f"written: {a.out} ({b.res['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
