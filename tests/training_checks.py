"""Comparisons of training runs shared by the engine's tests (not a test file itself)."""


def assert_same_training(a, b, init, rel=0.25):
    """Two CUDA runs of the same step from the same weights (captured and eager) moved each weight tensor alike: the gap
    between them within `rel` of how far training moved it. Not to a fixed tolerance: the graph and the eager step use
    different cuDNN kernels, and Adam moves a weight with a near-zero gradient by up to lr per step whatever the
    gradient's float noise. Measured on an H100 after 20 steps (lr 1e-3): eager against eager 1e-6 of the update,
    captured against eager 3.5e-4 (beta-VAE, fp32) to 0.08 (FactorVAE, bf16); a step that differs in substance (another
    batch, a skipped update) moves weights by a whole update."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        d, u = (sa[k].float() - sb[k].float()).norm(), (sa[k].float() - init[k].float().to(sa[k].device)).norm()
        assert d <= rel * u + 1e-6, f"{k}: captured and eager runs {float(d):.3g} apart, training moved it {float(u):.3g}"
