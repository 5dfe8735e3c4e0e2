"""Train the small pretrained models shipped in `disentbook/assets/pretrained/` and write their cards.

    python3 tools/train_pretrained.py                 # every recipe; runs in results/pretrained_runs/
    python3 tools/train_pretrained.py beta_vae_b4     # one
    python3 tools/train_pretrained.py --package-only  # reuse the runs, rewrite the weights and cards

Each model is trained by `disentbook.cli.train_job`, exactly what the `disentbook train` command in its card runs,
then stored as an fp16 `state_dict` (`NAME.pt`) beside a JSON card (`NAME.json`): model config, the command, steps,
seconds, device, the sha256 of the weights, and its metrics on the fixed evaluation set of
`classroom.pretrained.EVALUATIONS`, measured on the fp16 weights loaded back as float32 (what `pretrained(name)`
returns), so `tests/test_pretrained.py` can recompute them.
"""
from __future__ import annotations
import argparse, json, platform, sys, time
from pathlib import Path

import torch

# name: (method, dataset, params, data_params, model size arguments)
RECIPES = {
    "beta_vae_b1": ("beta_vae", "dsprites", dict(beta=1.0), {}, {}),
    "beta_vae_b4": ("beta_vae", "dsprites", dict(beta=4.0), {}, {}),
    "dip_vae_i": ("dip_vae_i", "dsprites", dict(lambda_od=10.0), {}, {}),
    "dip_vae_ii": ("dip_vae_ii", "dsprites", dict(lambda_od=5.0), {}, {}),
    "factor_vae": ("factor_vae", "dsprites", dict(gamma=35.0), {}, {}),
    "tcwae_mws": ("tcwae_mws", "dsprites", dict(beta=50.0, gamma=100.0), {}, {}),
    "contrastive_w2": ("contrastive_w2", "grassy", {}, dict(per_digit=713), {}),
}
STEPS = dict(dsprites=1000, grassy=800)
BATCH_SIZE, LR, SEED, LATENT_DIM, HIDDEN = 32, 1e-3, 0, 10, 128


def command(name: str) -> str:
    "The `disentbook train` command line of recipe `name`."
    method, dataset, params, data_params, _ = RECIPES[name]
    parts = ["disentbook train", f"--method {method}", f"--dataset {dataset}", f"--steps {STEPS[dataset]}",
             f"--batch-size {BATCH_SIZE}", f"--lr {LR:g}", f"--seed {SEED}", f"--hidden {HIDDEN}", "--device cpu", "--threads 1"]
    parts += [f"--latent-dim {LATENT_DIM}"] if dataset == "dsprites" else []
    parts += [f"--param {k}={v:g}" for k, v in params.items()]
    parts += [f"--data-param {k}={v}" for k, v in data_params.items()]
    return " ".join(parts + [f"--out results/pretrained_runs/{name}", "--no-eval"])


def train(name: str, runs: Path) -> dict:
    "Train recipe `name` into `runs/name` (unless done already); returns dict(seconds, steps)."
    from disentbook.cli import train_job
    out = runs / name
    info = out / "pretrained_train.json"
    if info.exists(): return json.loads(info.read_text())
    method, dataset, params, data_params, _ = RECIPES[name]
    t0 = time.perf_counter()
    res = train_job(method=method, dataset=dataset, params=params, steps=STEPS[dataset], batch_size=BATCH_SIZE, lr=LR,
                    latent_dim=LATENT_DIM, hidden=HIDDEN, out_dir=out, device="cpu", seed=SEED, data_params=data_params,
                    evaluate=False, threads=1, overwrite=True)
    d = dict(seconds=round(time.perf_counter() - t0, 1), steps=res["steps"])
    info.write_text(json.dumps(d))
    print(f"{name}: {d['steps']} steps in {d['seconds']:.0f} s", flush=True)
    return d


def package(name: str, runs: Path, trained: dict, dest: Path) -> dict:
    "fp16 weights + card of recipe `name` in `dest`; the metrics are measured on the stored weights."
    from disentbook.classroom import pretrained as P
    from disentbook.core import sha256_file
    from disentbook.train import load_model
    model = load_model(runs / name / "checkpoint", device="cpu")
    dest.mkdir(parents=True, exist_ok=True)
    weights = dest / f"{name}.pt"
    torch.save({k: v.detach().cpu().half() if v.is_floating_point() else v.cpu() for k, v in model.state_dict().items()},
               weights)
    method, dataset, params, data_params, _ = RECIPES[name]
    card = dict(name=name, method=method, dataset=dataset, params=params, data_params=data_params, model=model.config,
                weights=weights.name, dtype="float16", bytes=weights.stat().st_size, sha256=sha256_file(weights),
                num_parameters=sum(p.numel() for p in model.parameters()),
                train=dict(steps=trained["steps"], batch_size=BATCH_SIZE, lr=LR, seed=SEED, seconds=trained["seconds"],
                           device=f"cpu ({platform.processor() or platform.machine()}, 1 torch thread, 2 cores shared "
                                  "with other jobs)", torch=torch.__version__),
                command=command(name), recipe=f"python3 tools/train_pretrained.py {name}",
                note=(f"CPU-budget model: {trained['steps']} steps of batch {BATCH_SIZE} on a shared CPU (no GPU was "
                      "available), far short of the papers' 300k steps; it shows a partly trained latent space, "
                      "not the papers' numbers."),
                evaluation=P.EVALUATIONS[dataset])
    (dest / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n")       # card without metrics first
    t0 = time.perf_counter()
    card["metrics"] = P.measure(name, root=dest)
    card["evaluation_seconds"] = round(time.perf_counter() - t0, 1)
    (dest / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n")
    print(f"{name}: {card['bytes'] / 1e6:.2f} MB, metrics {card['metrics']}", flush=True)
    return card


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help=f"recipes (default: all): {', '.join(RECIPES)}")
    p.add_argument("--runs", default="results/pretrained_runs", help="where the training runs go")
    p.add_argument("--dest", default=str(Path(__file__).resolve().parents[1] / "disentbook" / "assets" / "pretrained"))
    p.add_argument("--train-only", action="store_true")
    p.add_argument("--package-only", action="store_true")
    a = p.parse_args(argv)
    names = a.names or list(RECIPES)
    bad = [n for n in names if n not in RECIPES]
    if bad: p.error(f"unknown recipe(s) {bad}; known: {', '.join(RECIPES)}")
    torch.set_num_threads(1)
    runs = Path(a.runs)
    for n in names:
        info = runs / n / "pretrained_train.json"
        trained = json.loads(info.read_text()) if a.package_only else train(n, runs)
        if not a.train_only: package(n, runs, trained, Path(a.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
