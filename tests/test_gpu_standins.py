"""CPU stand-ins for the GPU path: what a CUDA graph and a vmapped bf16 ensemble need of every objective's step, checked
where CI has no GPU. (1) Every registered objective's step — forward, backward, each auxiliary network's loss — run on the
`meta` device touches no CPU tensor: no CPU random draw, no tensor built on the host, no host-to-device copy (each of
which breaks a captured step or bakes a per-step value into it). (2) Every objective trains as a K = 2 ensemble and as a
single model through the engine at bf16 on the CPU, the dtype path of the CUDA default (`tools/first_contact.py`,
which runs the same on a GPU). (3) A reproduction at the smoke scale through the harness's GPU default (the ensemble
runner, bf16) end to end on the CPU."""
import contextlib, json, sys
from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import disentbook  # noqa: F401  (registers every objective)
from disentbook.data.training_sets import build_dataset, make_sampler
from disentbook.objectives.base import OBJECTIVES, Objective
from disentbook.training.config import TrainConfig
from disentbook.training.replay import step_support
from disentbook.training.run import build_run, run_specs

ROOT = Path(__file__).resolve().parents[1]
# the package's objectives (not those other test modules register, whatever order the modules are collected in)
LIBRARY = sorted(n for n in OBJECTIVES if OBJECTIVES[n].__module__.startswith("disentbook."))
sys.path.insert(0, str(ROOT / "tools"))
import first_contact  # noqa: E402

pytestmark = pytest.mark.usefixtures("offline_data")          # conftest: embedded digits, offline


class HostTensors(TorchDispatchMode):
    "Every operator call that touches a tensor off the `meta` device (inputs or outputs), by name."
    def __init__(self):
        super().__init__(); self.seen = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        host = [t for t in pytree.tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor) and t.device.type != "meta"]
        if host: self.seen.append(f"{func} on {', '.join(sorted({str(t.device) for t in host}))}")
        return out


@contextlib.contextmanager
def meta_autocast():
    "`torch.autocast('meta', enabled=False)` (the discriminators' fp32 block) is refused by torch: a no-op on `meta`."
    real = torch.autocast
    torch.autocast = lambda device_type, *a, **k: contextlib.nullcontext() if device_type == "meta" else real(device_type, *a, **k)
    try: yield
    finally: torch.autocast = real


def trainer_for(name: str):
    "A CPU Trainer of objective `name` on a small version of its default dataset (hidden 32, batch 8, fp32)."
    ds, data, kind, mc = first_contact.small_setup(name, hidden=32)
    cfg = TrainConfig(steps=1, batch_size=8, device="cpu", precision="fp32", progress=False)
    sampler = make_sampler(data, kind, "cpu", True)
    return build_run(run_specs([dict(objective=name, params={}, seed=0)], mc, cfg)[0], sampler, data=data, device="cpu")


def host_tensors_of_step(t) -> list[str]:
    "Run the step of Trainer `t` (main loss and backward, each aux loss and backward) on `meta`; the host tensors it touched."
    batch = t.draw()
    if t.objective.host_stage: batch = {**batch, **t.objective.prepare(t.model, batch)}   # before the step, on the host
    meta = torch.device("meta")
    t.model.to(meta); t.objective.to(meta)
    batch = {k: v.to(meta) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    mode = HostTensors()
    with meta_autocast(), mode:
        out = t.objective(t.model, batch, 3)
        out["loss"].backward()
        for a in t.aux_optimizers:                            # as Trainer.aux_update: the model frozen, the aux net trained
            for q in t.model.parameters(): q.requires_grad_(False)
            for q in t.objective.aux_nets[a].parameters(): q.requires_grad_(True)
            done = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
            t.objective.aux_loss(a, t.model, batch, done, 3)["loss"].backward()
    return mode.seen


@pytest.mark.parametrize("name", LIBRARY)
def test_every_objective_step_on_meta_touches_no_host_tensor(name):
    t = trainer_for(name)
    if step_support(t)["host"]: pytest.skip(f"{name} reads the host in its step: trained eagerly, never captured")
    assert host_tensors_of_step(t) == []


class _HostDraw(Objective):
    "A planted mistake: noise drawn on the CPU inside the step, then copied to the step's device."
    name, sampler, needs = "t_host_draw", "single", ()
    def forward(self, model, batch, step):
        return dict(loss=(model(batch["x"])["mu"] + torch.randn(2, 3).to(batch["x"].device)).pow(2).mean())


def test_the_meta_probe_finds_a_cpu_draw():
    from disentbook.data.samplers import SingleSampler
    from disentbook.nets import VAE
    from disentbook.training.trainer import Trainer
    data = build_dataset("digits", dict(n=32))
    t = Trainer(VAE(28, 1, 3, hidden=16), _HostDraw(), SingleSampler(data, device="cpu"),
                TrainConfig(steps=1, batch_size=2, device="cpu", precision="fp32", progress=False))
    seen = host_tensors_of_step(t)
    assert any("randn" in s and "cpu" in s for s in seen) and any("copy" in s for s in seen), seen


NOT_VMAPPABLE = {"contrastive_w2", "mathieu_ref", "srb_vae", "svae", "uai"}    # dropout or a host stage: captured singles


@pytest.mark.parametrize("name", LIBRARY)
def test_every_objective_trains_as_a_bf16_ensemble_and_single(name):
    "bf16 autocast on the CPU: the dtype path of the CUDA default (the draws recorded in bf16 code, replayed inside vmap)."
    r = first_contact.one(name, "cpu", steps=2, batch=4, precision="bf16", hidden=16)
    assert r["status"] == "ok", json.dumps(r)
    assert r["single"]["precision"] == "bf16" and r["ensemble"].get("precision", "bf16") == "bf16", r
    assert (r["ensemble"]["mode"] == "not vmappable") == (name in NOT_VMAPPABLE), r["ensemble"]
    assert r["single"]["mode"] == "eager" and not r["single"].get("fallback")          # no capture on a CPU


def test_a_reproduction_through_the_gpu_default_end_to_end_on_cpu(tmp_path):
    "The vae reproduction at smoke scale, the ensemble runner at bf16: every run trained by the engine, none fell back."
    from disentbook.repro.vae import reproduce_vae
    res = reproduce_vae("smoke", out_dir=tmp_path / "vae", device="cpu", runner="ensemble", precision="bf16")
    evals = [json.loads(p.read_text()) for p in (tmp_path / "vae").rglob("eval.json")]
    assert evals and Path(res["report_path"]).exists()
    for e in evals:
        mode = e.get("mode", e.get("train_mode", {}))
        assert "fallback" not in json.dumps(mode) and mode.get("precision") == "bf16", mode
