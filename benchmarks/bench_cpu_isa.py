"""What bf16 costs on a CPU without native bf16: a bare β-VAE (β = 4) training loop on 64×64 dSprites, batch 64, in fp32
and in bf16 autocast with channels-last weights, each timed in a fresh process under oneDNN's instruction set as this
CPU has it and capped by `ONEDNN_MAX_CPU_ISA` (AVX-512 without its bf16 extensions; AVX2), the way a machine without
them computes. Prints images/s per set (the best of the repeats) and the bf16 / fp32 ratios, measured in one run.

    python3 benchmarks/bench_cpu_isa.py [--steps 60] [--repeats 2]

Why it matters: a run keeps the precision it began in, so a run begun in bf16 on a machine with native bf16 and
continued on one without computes emulated bf16 there.
"""
import argparse, json, os, subprocess, sys, time

ISAS = (("native", None), ("AVX-512 without bf16", "AVX512_CORE"), ("AVX2", "AVX2"))

def child(steps: int, repeats: int) -> dict:
    "Time both loops in this process (its oneDNN instruction set fixed by the environment it started with)."
    import torch
    from disentbook.core import make_generator, to_float_images
    from disentbook.data.dsprites import DSprites
    from disentbook.nets import VAE
    from disentbook.objectives.vae import gaussian_kl
    torch.set_num_threads(2)
    images = DSprites().subset(posX=range(0, 32, 4), posY=range(0, 32, 4)).images
    def rate(bf16: bool, seed: int) -> float:
        torch.manual_seed(seed)
        model = VAE().to(memory_format=torch.channels_last) if bf16 else VAE()
        opt, g = torch.optim.Adam(model.parameters(), lr=1e-4), make_generator(seed)
        def step():
            x = to_float_images(images[torch.randint(len(images), (64,), generator=g)])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(x)
                loss = (model.nll(out["x_out"].float(), x).mean()
                        + 4.0 * gaussian_kl(out["mu"].float(), out["logvar"].float()).sum(1).mean())
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        for _ in range(5): step()
        t = time.perf_counter()
        for _ in range(steps): step()
        return steps * 64 / (time.perf_counter() - t)
    out = {"fp32": [], "bf16": []}
    for r in range(repeats):
        for k in out: out[k].append(rate(k == "bf16", r))
    return out

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60); p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child: print(json.dumps(child(a.steps, a.repeats))); return
    print(f"β-VAE loop, batch 64, 2 threads, {a.steps} timed steps x {a.repeats} repeats per precision")
    for label, isa in ISAS:
        env = dict(os.environ, OMP_NUM_THREADS="2")
        if isa: env["ONEDNN_MAX_CPU_ISA"] = isa
        r = subprocess.run([sys.executable, __file__, "--child", "--steps", str(a.steps), "--repeats", str(a.repeats)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0: print(f"{label}: failed ({r.stderr.strip().splitlines()[-1:]})"); continue
        d = json.loads(r.stdout.strip().splitlines()[-1])
        f, b = max(d["fp32"]), max(d["bf16"])
        print(f"{label:22s} fp32 {f:7.1f} images/s   bf16 {b:7.1f} images/s   bf16 / fp32 {b / f:.2f}x   "
              f"(repeats: fp32 {', '.join(f'{v:.0f}' for v in d['fp32'])}; bf16 {', '.join(f'{v:.0f}' for v in d['bf16'])})")

if __name__ == "__main__":
    main()
