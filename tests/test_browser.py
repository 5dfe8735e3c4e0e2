"""End to end, where students use the widgets: a notebook with a `LatentExplorer` and two check buttons is
served by Voilà on localhost and driven by Debian's headless Chromium through Playwright. Moving a slider
must change the decoded image, clicking Check must show the checker's verdict.

Needs /usr/bin/chromium (Debian packages chromium, chromium-driver; `.ci/run` installs them) and the dev
requirements `voila` and `playwright` (no browser download: Playwright is pointed at Debian's Chromium).
Skips with the reason when one is missing."""
import importlib.util, os, shutil, socket, subprocess, sys, time
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
# Chromium on a closed network, as root: no sandbox, no GPU, no background connections to Google.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
KERNEL_TIMEOUT_S = 120  # Voilà starts a kernel that imports torch and builds the model before anything shows
UI_TIMEOUT_S = 30       # one widget round trip (browser -> kernel -> browser)


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not found (install Debian's chromium and chromium-driver, as .ci/run does)"
    for mod in ("playwright", "voila", "ipykernel", "ipywidgets", "nbformat"):
        if importlib.util.find_spec(mod) is None:
            return f"Python package {mod!r} not installed (python -m pip install -e '.[dev]')"
    return None


pytestmark = pytest.mark.browser

NOTEBOOK_CELLS = [
    """\
import torch
from disentbook.nets import VAE
from disentbook.widgets import LatentExplorer, check_button
torch.manual_seed(0)
model = VAE(image_size=28, latent_dim=3).eval()
images = torch.randint(0, 256, (4, 1, 28, 28), dtype=torch.uint8)
explorer = LatentExplorer(model, images, num_images=4)
explorer""",
    """\
try:  # the exercise checkers when they exist, else a stand-in with the same result attributes
    from disentbook.classroom.exercises import check_gaussian_kl as checker
    from disentbook.objectives.vae import gaussian_kl as right
    def wrong(mu, logvar, *args, **kwargs): return 0.5 * (mu.pow(2) + logvar.exp() - logvar)  # forgot the -1
except ImportError:
    from types import SimpleNamespace
    def checker(fn):
        ok = fn(3) == 9
        return SimpleNamespace(passed=ok, name="square", hint=None if ok else "multiply x by itself",
                               message="" if ok else f"square(3) gave {fn(3)}, expected 9",
                               max_error=abs(fn(3) - 9), failing_input=None if ok else 3)
    def right(x): return x * x
    def wrong(x): return x + x
right_button = check_button(checker, right, description="Check right")
right_button.button.add_class("check-right"); right_button.html.add_class("result-right")
wrong_button = check_button(checker, wrong, description="Check wrong")
wrong_button.button.add_class("check-wrong"); wrong_button.html.add_class("result-wrong")
display(right_button, wrong_button)""",
]


def _write_notebook(path: Path):
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    nb.metadata["kernelspec"] = dict(name="python3", display_name="Python 3", language="python")
    nbformat.write(nb, str(path))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"voila exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0: return
        time.sleep(0.2)
    pytest.fail(f"voila did not listen on port {port} within {timeout} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen):
    if proc.poll() is None:
        proc.terminate()
        try: proc.wait(10)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait(10)


@pytest.fixture
def voila_url(tmp_path):
    "Serve the notebook with Voilà on 127.0.0.1 at a free port; the server is always stopped afterwards."
    reason = _missing()
    if reason: pytest.skip(reason)
    nb = tmp_path / "explorer.ipynb"; _write_notebook(nb)
    env = {k: v for k, v in os.environ.items() if k not in ("IN_TEST", "PYTEST_CURRENT_TEST")}
    env.update(MPLBACKEND="Agg", DISENTBOOK_OFFLINE="1", DISENTBOOK_DATA=str(tmp_path / "data"),
               JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
    port, log = _free_port(), tmp_path / "voila.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "voila", str(nb), "--no-browser", f"--port={port}",
                                 "--Voila.ip=127.0.0.1", "--show_tracebacks=True"],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc, log)
        yield f"http://127.0.0.1:{port}/", log
    finally:
        _stop(proc)


@pytest.fixture
def page(tmp_path):
    "A page in Debian's headless Chromium (fresh profile under tmp_path), always closed afterwards."
    reason = _missing()
    if reason: pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path / "chromium-profile"), executable_path=CHROMIUM,
                                                   headless=True, args=CHROMIUM_FLAGS,
                                                   viewport=dict(width=1200, height=900))
        try:
            pg = ctx.pages[0] if ctx.pages else ctx.new_page()
            pg.set_default_timeout(UI_TIMEOUT_S * 1000)
            yield pg
        finally:
            ctx.close()


IMG = "img.disentbook-latent-image"
SRC_JS = f"() => {{ const i = document.querySelector('{IMG}'); return i ? i.getAttribute('src') : null; }}"


def _wait_src_change(page, old: str, timeout_s: float) -> str | None:
    "The image's new src once it differs from `old` (ipywidgets shows each new PNG as a fresh blob URL)."
    try:
        page.wait_for_function(f"(old) => {{ const s = ({SRC_JS})(); return s && s !== old; }}", arg=old,
                               timeout=timeout_s * 1000)
    except Exception:
        return None
    return page.evaluate(SRC_JS)


def test_explorer_and_check_in_browser(voila_url, page, tmp_path):
    url, log = voila_url
    t0 = time.monotonic()
    page.goto(url, wait_until="domcontentloaded", timeout=KERNEL_TIMEOUT_S * 1000)
    try:  # Voilà runs the notebook, then the widget manager renders the views
        page.wait_for_selector(IMG, state="visible", timeout=KERNEL_TIMEOUT_S * 1000)
        page.wait_for_function(f"() => {{ const s = ({SRC_JS})(); return s && s.length > 0; }}",
                               timeout=UI_TIMEOUT_S * 1000)
    except Exception:
        page.screenshot(path=str(tmp_path / "timeout.png"), full_page=True)
        pytest.fail(f"the explorer did not render within {KERNEL_TIMEOUT_S} s (screenshot {tmp_path / 'timeout.png'});"
                    f" voila log:\n{log.read_text()[-3000:]}")
    t_render = time.monotonic() - t0
    sliders = page.locator(".disentbook-latent-slider")
    assert sliders.count() == 3, "one slider per latent"
    src0 = page.evaluate(SRC_JS)

    # Move the first slider (the latent with the largest KL) with the keyboard; dragging as a fallback.
    t1 = time.monotonic()
    handle = sliders.first.locator(".noUi-handle")
    handle.focus()
    for _ in range(10): handle.press("ArrowRight")
    src1, moved_by = _wait_src_change(page, src0, UI_TIMEOUT_S), "keyboard"
    if src1 is None:
        moved_by = "drag"
        box = sliders.first.locator(".noUi-target").bounding_box()
        hb = handle.bounding_box()
        page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2); page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.9, hb["y"] + hb["height"] / 2, steps=5); page.mouse.up()
        src1 = _wait_src_change(page, src0, UI_TIMEOUT_S)
    assert src1 is not None, "moving the slider did not change the decoded image"
    t_slider = time.monotonic() - t1

    # Reset brings back the image of the selected code (a new blob URL, so compare only that it changes again)
    page.locator("button.disentbook-reset").click()
    assert _wait_src_change(page, src1, UI_TIMEOUT_S) is not None, "Reset did not re-render the image"

    t2 = time.monotonic()
    page.locator("button.check-right").click()
    page.wait_for_function("() => (document.querySelector('.result-right') || {}).innerText?.includes('passed')",
                           timeout=UI_TIMEOUT_S * 1000)
    page.locator("button.check-wrong").click()
    page.wait_for_function("() => (document.querySelector('.result-wrong') || {}).innerText?.includes('✗')",
                           timeout=UI_TIMEOUT_S * 1000)
    t_check = time.monotonic() - t2
    right_color = page.locator(".result-right .disentbook-feedback").evaluate("e => getComputedStyle(e).color")
    wrong_color = page.locator(".result-wrong .disentbook-feedback").evaluate("e => getComputedStyle(e).color")
    assert right_color == "rgb(0, 128, 0)" and wrong_color == "rgb(255, 0, 0)", (right_color, wrong_color)
    assert "passed" not in page.locator(".result-wrong").inner_text()

    shot = tmp_path / "explorer.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    print(f"slider moved by {moved_by}; timings: first render {t_render:.1f} s, slider -> new image {t_slider:.2f} s, two checks {t_check:.2f} s")
