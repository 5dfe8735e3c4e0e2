"""Random draws inside a training or evaluation step are made on the step's device (or the generator's), never on the
CPU and then copied: on a GPU such a draw refuses vmap and puts a blocking host-to-device copy inside a captured step.
The `meta` device stands in for the GPU: every factory call's device is recorded and must not be the CPU."""
import torch
from torch.overrides import TorchFunctionMode

from disentbook.objectives.contrastive import permute_pairs
from disentbook.objectives.refvae import _gen_latents, decoder_sensitivity

FACTORIES = {torch.randn, torch.rand, torch.randint, torch.randperm, torch.randn_like, torch.empty, torch.zeros, torch.ones}


class Devices(TorchFunctionMode):
    "Records the device each random or factory call makes its tensor on."
    def __init__(self): super().__init__(); self.seen = []
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in FACTORIES and isinstance(out, torch.Tensor): self.seen.append((func.__name__, out.device.type))
        return out


def _no_cpu(seen):
    assert seen and all(d != "cpu" for _, d in seen), seen


def test_permute_pairs_draws_on_the_batch_device():
    z, s = torch.empty(8, 3, device="meta"), torch.empty(8, 2, device="meta")
    with Devices() as m: permute_pairs(z, s)
    _no_cpu(m.seen)


def test_refvae_latent_draws_on_the_step_device():
    class M: z_dim, e_dim, s_dim = 4, 3, 3
    with Devices() as m: out = _gen_latents(M(), 5, torch.device("meta"))
    _no_cpu(m.seen)
    assert all(t.device.type == "meta" for t in out)


def test_decoder_sensitivity_draws_on_the_codes_device():
    z = torch.empty(6, 4, device="meta")
    with Devices() as m:
        try: decoder_sensitivity(lambda z, e: torch.cat([z, e], 1), z, 3)
        except (NotImplementedError, RuntimeError): pass              # float() of a meta tensor: the draws were made first
    _no_cpu(m.seen)
