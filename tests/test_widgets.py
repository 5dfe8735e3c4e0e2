"""Headless tests of disentbook.classroom.widgets: the rendering functions against known values, and the widgets
driven from Python (slider values, `button.click()`), as no browser is there to move them."""
import io, time
from types import SimpleNamespace as NS

import numpy as np
import pytest
import torch
from PIL import Image

from disentbook.core import InputError
from disentbook.nets import VAE
from disentbook.objectives.vae import gaussian_kl
from disentbook.eval.viz import kl_per_dim
from disentbook.classroom.checks import check_button, feedback_html
from disentbook.classroom.panel import png_bytes
from disentbook.classroom.widgets import (LatentExplorer, check_blocks, decode_latent, latent_blocks, gaussian_kl_explorer,
                                          gaussian_kl_figure, kl_2d_gaussian, latent_order, parameter_explorer, render_value,
                                          traversal_viewer)


class PixelModel(torch.nn.Module):
    "Decoder paints the code: z (L,) -> 1×L image with pixels sigmoid(z). Encoder mean = logit of the pixels."
    def __init__(self, logvar=(0.0, -1.0, -3.0)):
        super().__init__()
        self.latent_dim = len(logvar); self.shape = (1, 1, self.latent_dim)
        self.w = torch.nn.Parameter(torch.zeros(1)); self.register_buffer("lv", torch.tensor(logvar))
    @property
    def device(self): return self.w.device
    def encode(self, x):
        x = x.float() / 255 if x.dtype == torch.uint8 else x.float()
        mu = torch.logit(x.clamp(0.01, 0.99)).flatten(1)
        return mu, self.lv.expand_as(mu)
    @torch.no_grad()
    def embed(self, x): return self.encode(x.to(self.device))[0]
    def decode(self, z): return z.reshape(-1, 1, 1, self.latent_dim)
    def mean(self, o): return torch.sigmoid(o)


def _png(b: bytes) -> np.ndarray: return np.asarray(Image.open(io.BytesIO(b)))

X = torch.tensor([[[[30, 128, 220]]], [[[200, 60, 128]]], [[[128, 128, 128]]]], dtype=torch.uint8)


# ---------------------------------------------------------------- rendering functions
def test_decode_latent_paints_the_code():
    img = decode_latent(PixelModel(), [0.0, 10.0, -10.0])
    assert img.dtype == np.uint8 and img.shape == (1, 3) and img.tolist() == [[128, 255, 0]]
    assert decode_latent(PixelModel(), torch.zeros(1, 3)).tolist() == [[128, 128, 128]]
    with pytest.raises(InputError, match="3 latents"): decode_latent(PixelModel(), torch.zeros(4))
    with pytest.raises(InputError, match="one code"): decode_latent(PixelModel(), torch.zeros(2, 3))


def test_decode_latent_vae_shapes():
    torch.manual_seed(0)
    assert decode_latent(VAE(image_size=28, latent_dim=3), torch.zeros(3)).shape == (28, 28)
    rgb = decode_latent(VAE(image_size=28, channels=3, latent_dim=2), torch.zeros(2))
    assert rgb.shape == (28, 28, 3) and rgb.dtype == np.uint8


def test_latent_order_follows_kl():
    m = PixelModel()
    order, kl = latent_order(m, X, return_kl=True)
    assert torch.equal(kl, kl_per_dim(m, X))
    assert order == torch.argsort(kl, descending=True).tolist() == latent_order(m, X)
    # all codes equal: the order is the posterior variance's, smallest variance (largest KL) first
    assert latent_order(m, torch.full((2, 1, 1, 3), 128, dtype=torch.uint8)) == [2, 1, 0]


def test_latent_order_deterministic_encoder_uses_code_variance():
    torch.manual_seed(0)
    m = VAE(image_size=28, latent_dim=4, encoder="deterministic")
    x = torch.randint(0, 256, (16, 1, 28, 28), dtype=torch.uint8)
    order, score = latent_order(m, x, return_kl=True)
    assert torch.allclose(score, m.embed(x).var(0, unbiased=False))
    assert order == torch.argsort(score, descending=True).tolist()


def test_png_bytes_nearest_neighbour():
    a = np.array([[0, 255], [128, 7]], dtype=np.uint8)
    b = _png(png_bytes(a, scale=3))
    assert b.shape == (6, 6) and np.array_equal(b, np.repeat(np.repeat(a, 3, 0), 3, 1))
    rgb = np.zeros((2, 1, 3)); rgb[0, 0] = (1.0, 0.5, 0.0)
    assert _png(png_bytes(rgb, scale=2))[0, 1].tolist() == [255, 128, 0]
    assert _png(png_bytes(torch.ones(2, 2, 1), 1)).tolist() == [[255, 255], [255, 255]]
    for bad in (np.zeros((2, 2, 2)), np.full((2, 2), 1.5), np.zeros(4)):
        with pytest.raises(InputError): png_bytes(bad)
    with pytest.raises(InputError): png_bytes(a, scale=0)


@pytest.mark.parametrize("mean,var", [((0.0, 0.0), (1.0, 1.0)), ((0.5, -1.2), (0.3, 2.0)), ((2.0, 1.0), (0.01, 5.0))])
def test_kl_2d_gaussian_matches_vae_gaussian_kl(mean, var):
    ref = gaussian_kl(torch.tensor(mean, dtype=torch.float64), torch.tensor(var, dtype=torch.float64).log()).sum()
    assert kl_2d_gaussian(mean, var) == pytest.approx(ref.item(), rel=1e-12, abs=1e-12)
    assert kl_2d_gaussian(mean, np.diag(var)) == pytest.approx(ref.item(), rel=1e-12, abs=1e-12)


def test_kl_2d_gaussian_full_covariance_closed_form():
    s1, s2, rho, mu = 1.5, 0.5, -0.7, np.array([0.3, -0.4])
    S = np.array([[s1**2, rho * s1 * s2], [rho * s1 * s2, s2**2]])
    det = s1**2 * s2**2 * (1 - rho**2)
    assert kl_2d_gaussian(mu, S) == pytest.approx(0.5 * (s1**2 + s2**2 + mu @ mu - 2 - np.log(det)))
    with pytest.raises(InputError, match="positive definite"): kl_2d_gaussian([0, 0], [[1, 2], [2, 1]])
    with pytest.raises(InputError): kl_2d_gaussian([0, 0, 0], [1, 1])


def test_gaussian_kl_figure():
    from matplotlib.figure import Figure
    fig = gaussian_kl_figure([1.0, 0.5], [[2.0, 0.8], [0.8, 1.0]])
    assert isinstance(fig, Figure) and f"{kl_2d_gaussian([1.0, 0.5], [[2.0, 0.8], [0.8, 1.0]]):.3f}" in fig.axes[0].get_title()
    assert len(fig.axes[0].patches) == 4  # 1σ and 2σ ellipses of q and of the prior
    kind, png = render_value(fig)
    assert kind == "png" and png[:8] == b"\x89PNG\r\n\x1a\n"


def test_feedback_html():
    ok = feedback_html(NS(passed=True, name="kl", message="", hint=None))
    assert "✓ passed" in ok and "color:green" in ok and "red" not in ok
    bad = feedback_html(NS(passed=False, name="kl", message="kl: got <0.5>", hint="add -1"))
    assert "color:red" in bad and "&lt;0.5&gt;" in bad and "add -1" in bad and "passed" not in bad


# ---------------------------------------------------------------- widgets driven from Python
def test_latent_explorer_slider_reset_dropdown():
    m = PixelModel()
    ex = LatentExplorer(m, X, scale=2)
    kl = kl_per_dim(m, X)
    assert ex.order == torch.argsort(kl, descending=True).tolist()
    assert [s.description for s in ex.sliders] == [f"z{d} KL={kl[d]:.2f}" for d in ex.order]
    start = ex.image.value
    assert np.array_equal(_png(start)[::2, ::2], decode_latent(m, ex.codes[0]))
    ex.sliders[ex.order.index(1)].value = 2.0  # as the browser does: the slider's value trait changes
    moved = ex.image.value
    assert moved != start and _png(moved)[0, 2] == round(255 * torch.sigmoid(torch.tensor(2.0)).item())
    assert _png(moved)[0, 0] == _png(start)[0, 0] and _png(moved)[0, 4] == _png(start)[0, 4]  # other pixels kept
    ex.reset.click()
    assert ex.image.value == start and torch.allclose(ex.code(), ex.codes[0].clamp(-3, 3), atol=1e-6)
    ex.dropdown.value = 1
    assert ex.index == 1 and torch.allclose(ex.code(), ex.codes[1], atol=1e-6)
    assert ex.image.value != start and np.array_equal(_png(ex.original.value)[::2, ::2], X[1, 0].numpy())
    ex.set_value(0, -1.0); ex.reset.click()
    assert torch.allclose(ex.code(), ex.codes[1], atol=1e-6)
    with pytest.raises(InputError): ex.set_value(7, 0.0)


def test_latent_explorer_sliders_cover_codes():
    "Codes beyond ±span widen the slider so that Reset restores them exactly."
    x = torch.tensor([[[[1, 254, 128]]]], dtype=torch.uint8)  # logit(0.01) ≈ -4.6, beyond span
    ex = LatentExplorer(PixelModel(), x, span=3.0)
    assert torch.allclose(ex.code(), ex.codes[0], atol=1e-6)


def test_latent_explorer_vae_is_fast():
    torch.manual_seed(0)
    vae = VAE(image_size=28, latent_dim=3).eval()
    x = torch.randint(0, 256, (8, 1, 28, 28), dtype=torch.uint8)
    ex = LatentExplorer(vae, x)
    assert len(ex.sliders) == 3 and len(ex.dropdown.options) == 8
    t = time.perf_counter()
    for v in np.linspace(-2, 2, 5): ex.set_value(ex.order[0], v)
    assert (time.perf_counter() - t) / 5 < 0.25 and ex.last_render_s < 0.25
    assert _png(ex.image.value).shape == (28 * 4, 28 * 4)
    assert ex._repr_mimebundle_()  # displays as its container


def test_latent_explorer_blocks_on_pixel_model():
    "Sliders grouped by block under a heading, KL order inside each block, labels by block name and index in it."
    m = PixelModel()
    ex = LatentExplorer(m, X, scale=1, blocks={"p (first)": [0], "q (rest)": [1, 2]})
    assert ex.order[0] == 0 and sorted(ex.order[1:]) == [1, 2]
    assert [s.description.split()[0] for s in ex.sliders][0] == "p0"
    assert {s.description.split()[0] for s in ex.sliders[1:]} == {"q0", "q1"}
    assert ex.block_dims("q (rest)") == ex.order[1:] and ex.block_of == {0: "p (first)", 1: "q (rest)", 2: "q (rest)"}
    heads = [w.value for w in ex.widget.children[1].children if not hasattr(w, "min")]
    assert len(heads) == 2 and "p (first)" in heads[0] and "q (rest)" in heads[1]
    before = ex.image.value
    ex.set_value(2, 2.5)
    assert _png(ex.image.value)[0, 2] == round(255 * torch.sigmoid(torch.tensor(2.5)).item()) and ex.image.value != before
    for bad in ({"a": [0, 1]}, {"a": [0, 1, 2], "b": []}, {"a": [0, 0, 1, 2]}, "z"):
        with pytest.raises(InputError, match="blocks"): LatentExplorer(m, X, blocks=bad)
    assert latent_blocks(m) is None and check_blocks(None, 3) is None


def _mean_change(ex, dim, value):
    before = _png(ex.image.value).astype(float)
    ex.set_value(dim, value)
    after = _png(ex.image.value).astype(float)
    ex.restore()
    return np.abs(after - before).mean()


def test_latent_explorer_on_pretrained_srb_vae():
    "The sRb-VAE's sliders come as z (content) and e (style); moving an e slider changes the decoded digit visibly."
    from disentbook.classroom.pretrained import pretrained, sample_images
    model = pretrained("srb_vae")
    ex = LatentExplorer(model, sample_images("srb_vae", 8))
    assert list(ex.blocks) == ["z (content)", "e (style)"] and ex.block_dims("e (style)")[0] >= model.z_dim
    labels = [s.description.split()[0] for s in ex.sliders]
    assert labels[:model.z_dim] == [f"z{d}" for d in ex.order[:model.z_dim]]
    assert labels[model.z_dim:] == [f"e{d - model.z_dim}" for d in ex.order[model.z_dim:]]
    e0, z0 = ex.block_dims("e (style)")[0], ex.block_dims("z (content)")[0]     # the largest KL of each block
    assert _mean_change(ex, e0, ex.sliders[ex.order.index(e0)].max) > 2, "an e slider changes the image visibly"
    assert _mean_change(ex, z0, ex.sliders[ex.order.index(z0)].max) > 2, "a z slider changes the image visibly"


def test_latent_explorer_on_pretrained_invariance_model():
    "The invariance model's sliders come as the predictive block z_p and the nuisance block z_n (from the card's d_p)."
    from disentbook.classroom.pretrained import pretrained, sample_images
    model = pretrained("swap_invariance")
    ex = LatentExplorer(model, sample_images("swap_invariance", 4))
    assert list(ex.blocks) == ["z_p (predictive)", "z_n (nuisance)"]
    assert sorted(ex.block_dims("z_p (predictive)")) == list(range(10)) and ex.sliders[10].description.startswith("z_n")
    zn = ex.block_dims("z_n (nuisance)")[0]
    assert _mean_change(ex, zn, ex.sliders[ex.order.index(zn)].max) > 2, "a nuisance slider changes the image visibly"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_latent_explorer_on_gpu():
    pytest.importorskip("ipywidgets")
    torch.manual_seed(0)
    vae = VAE(image_size=28, latent_dim=3).cuda().eval()
    x = torch.randint(0, 256, (4, 1, 28, 28), dtype=torch.uint8)
    ex = LatentExplorer(vae, x)
    before = ex.image.value
    ex.set_value(ex.order[0], 2.5)
    assert ex.image.value != before and ex.codes.device.type == "cpu"


def test_traversal_viewer():
    tv = traversal_viewer(PixelModel(), X, n_steps=5, scale=1)
    assert _png(tv.image.value).shape == (3 * 2 + 1, 5 * 4 + 1)
    tv.dim.value = tv.order[0]
    one = _png(tv.image.value)
    assert one.shape == (3, 21)
    # cells are 1x3 images with 1 px borders: pixel d of step q sits at column 1 + 4q + d, and is sigmoid(value)
    traversed = one[1, 1 + tv.order[0]::4][:5]
    assert np.array_equal(traversed, np.round(255 * torch.sigmoid(torch.linspace(-2.5, 2.5, 5)).numpy()))
    before = tv.image.value; tv.index.value = 1
    assert tv.image.value != before


def test_parameter_explorer():
    pe = parameter_explorer(lambda a, b, c: a * b if c == "mul" else a + b, a=(0, 10), b=(0.0, 1.0, 0.1, 0.5),
                            c=["mul", "add"])
    assert pe.values == dict(a=0, b=0.5, c="mul") and pe.last_value == 0
    pe.controls["a"].value = 4
    assert pe.last_value == 2.0 and "2" in pe.text.value
    pe.controls["c"].value = "add"
    assert pe.last_value == 4.5
    img = parameter_explorer(lambda v: np.full((2, 2), v, dtype=np.uint8), scale=1, v=(0, 255, 1, 7))
    assert _png(img.image.value).tolist() == [[7, 7], [7, 7]] and img.image.layout.display == ""
    err = parameter_explorer(lambda n: 1 / n, n=[0, 1])
    assert isinstance(err.error, ZeroDivisionError) and "color:red" in err.text.value
    with pytest.raises(InputError): parameter_explorer(lambda a: a, a="nope")
    with pytest.raises(InputError): parameter_explorer(lambda: 0)


def test_gaussian_kl_explorer():
    ge = gaussian_kl_explorer()
    v = ge.values
    first = ge.image.value
    assert first[:4] == b"\x89PNG"
    c = v["rho"] * v["sigma1"] * v["sigma2"]
    expected = kl_2d_gaussian([v["mu1"], v["mu2"]], [[v["sigma1"] ** 2, c], [c, v["sigma2"] ** 2]])
    assert f"{expected:.3f}" in ge.last_value.axes[0].get_title()
    ge.controls["rho"].value = 0.5
    assert ge.image.value != first and ge.error is None


class FakeResult(NS):
    def __bool__(self): return self.passed

def fake_checker(fn):
    ok = fn(3) == 9
    return FakeResult(passed=ok, name="square", message="" if ok else f"square(3) gave {fn(3)}",
                      hint=None if ok else "multiply x by itself", max_error=abs(fn(3) - 9), failing_input=3)


def test_check_button_green_and_red():
    cb = check_button(fake_checker, lambda x: x * x)
    assert cb.html.value == "" and cb.last_result is None
    cb.button.click()
    assert cb.last_result.passed and "✓ passed" in cb.html.value and "color:green" in cb.html.value
    cb = check_button(fake_checker, lambda x: x + x, description="Check mine")
    assert cb.button.description == "Check mine"
    cb.button.click()
    assert not cb.last_result and "color:red" in cb.html.value and "gave 6" in cb.html.value
    assert "multiply x by itself" in cb.html.value
    assert cb.check() is cb.last_result


def test_check_button_by_name_and_errors(monkeypatch):
    import __main__
    cb = check_button(fake_checker, "student_square")
    assert cb.check() is None and isinstance(cb.last_error, NameError) and "color:red" in cb.html.value
    monkeypatch.setattr(__main__, "student_square", lambda x: x ** 2, raising=False)
    cb.button.click()
    assert cb.last_result.passed and cb.last_error is None and "✓ passed" in cb.html.value
    boom = check_button(lambda fn: 1 / 0, lambda x: x)
    boom.button.click()
    assert isinstance(boom.last_error, ZeroDivisionError) and "could not run" in boom.html.value


def test_check_button_with_exercise_checkers():
    ex = pytest.importorskip("disentbook.classroom.exercises")
    cb = check_button(ex.check_gaussian_kl, gaussian_kl)
    cb.button.click()
    assert cb.last_result.passed, cb.last_result.message
    assert "✓ passed" in cb.html.value
    cb = check_button(ex.check_gaussian_kl, lambda mu, logvar, *a, **k: 0.5 * (mu.pow(2) + logvar.exp() - logvar))
    cb.button.click()
    assert not cb.last_result.passed and "color:red" in cb.html.value


# ---------------------------------------------------------------- static faces (issue 26): a PNG beside the widget
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _bundle(obj) -> dict:
    "The display data a kernel sends for `obj` (IPython's own formatter, as `display(obj)` uses)."
    from IPython.core.formatters import DisplayFormatter
    data, _ = DisplayFormatter().format(obj)
    return data


def _bundle_png(obj) -> np.ndarray:
    import base64
    data = _bundle(obj)
    assert WIDGET_VIEW in data, "JupyterLab and Voilà still get the widget's view"
    assert isinstance(data["image/png"], str), "binary data travels base64-encoded"
    png = base64.b64decode(data["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return _png(png)


def test_latent_explorer_static_face_traversal_by_hand():
    "Row r of the traversal moves the r-th slider's latent over [-span, span]; the other pixels keep the code's."
    m = PixelModel()
    ex = LatentExplorer(m, X, scale=1, span=2.0)
    ex.set_value(1, 0.7)                          # the face shows the code as it stands, not only the start
    t = ex.traversal(n_steps=5)
    assert t.shape == (3 * 5, 1, 1, 3)
    vals = torch.linspace(-2.0, 2.0, 5)
    assert ex.traversal_dims() == ex.order
    for r, d in enumerate(ex.order):
        expected = torch.sigmoid(ex.code()).repeat(5, 1); expected[:, d] = torch.sigmoid(vals)
        assert torch.allclose(t[r * 5:(r + 1) * 5, 0, 0], expected, atol=1e-6), (r, d)
    assert len(ex.traversal(n_steps=3, max_rows=2)) == 2 * 3
    assert ex.traversal_dims(2) == [d for d in ex.order if d in torch.argsort(ex.kl, descending=True)[:2].tolist()]
    face = _bundle_png(ex)
    assert face.ndim == 3 and face.shape[0] >= 100 and face.shape[1] >= 300   # a readable figure, not a 1x3 image
    assert np.array_equal(_png(ex.static_face()["image/png"]), face)


def test_latent_explorer_static_face_on_pretrained_vae():
    "On a shipped model the face is a labelled figure whose traversal rows differ (trained latents change the image)."
    from disentbook.classroom.pretrained import pretrained, sample_images
    model = pretrained("beta_vae_b4")
    ex = LatentExplorer(model, sample_images("beta_vae_b4", 4))
    t = ex.traversal(n_steps=7)
    assert t.shape[0] == 7 * min(12, len(ex.order)) and ex.traversal_dims() == ex.order[:len(t) // 7]
    first = t[:7]                                  # the largest-KL latent: its traversal changes the image
    assert (first[0] - first[-1]).abs().mean() > 0.01
    t0 = time.perf_counter(); face = _bundle_png(ex); dt = time.perf_counter() - t0
    assert face.shape[0] > 200 and dt < 3, dt


def test_traversal_viewer_and_parameter_explorer_static_faces():
    tv = traversal_viewer(PixelModel(), X, n_steps=5, scale=1)
    assert np.array_equal(_bundle_png(tv), _png(bytes(tv.image.value)))
    tv.dim.value = tv.order[0]                     # the face follows the viewer
    assert _bundle_png(tv).shape == (3, 21)
    ge = gaussian_kl_explorer()
    assert np.array_equal(_bundle_png(ge), _png(bytes(ge.image.value)))
    img = parameter_explorer(lambda v: np.full((2, 2), v, dtype=np.uint8), scale=1, v=(0, 255, 1, 7))
    assert _bundle_png(img).tolist() == [[7, 7], [7, 7]]
    text = parameter_explorer(lambda a, b: a + b, a=(0, 10), b=2.5)
    data = _bundle(text)
    assert WIDGET_VIEW in data and "image/png" not in data and "2.5" in data["text/html"]


def test_check_button_has_no_static_picture():
    data = _bundle(check_button(fake_checker, lambda x: x * x))
    assert WIDGET_VIEW in data and "image/png" not in data
