"""End to end, where students use the widgets: a notebook with a `LatentExplorer` and two check buttons is
served by Voilà on localhost and driven by Debian's headless Chromium through Playwright. Moving a slider
must change the decoded image, clicking Check must show the checker's verdict.

Needs /usr/bin/chromium (Debian packages chromium, chromium-driver; `.ci/run` installs them) and the dev
requirements `voila` and `playwright` (no browser download: Playwright is pointed at Debian's Chromium).
Skips with the reason when one is missing.

The JupyterLab tests (issue 16.6) start `jupyter lab --no-browser` on a free localhost port with a token, open a temp
copy of the real student notebook `nbs/exercises/00_explore_a_latent_space.ipynb` (pretrained models), Run All, move
a slider and compare the decoded image's pixels; and open a student edition of `01_vae_exercises`, answer exercise 1
wrong then right, and read the feedback (needs `jupyterlab` too)."""
import importlib.util, os, re, shutil, socket, subprocess, sys, time
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
from disentbook.classroom.widgets import LatentExplorer
from disentbook.classroom.checks import check_button
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


# ---------------------------------------------------------------------------------------------------------------
# JupyterLab itself (issue 16.6): the real student notebook with the pretrained models, and one student edition.

NBS = Path(__file__).resolve().parents[1] / "nbs"
LAB_TIMEOUT_S = 240     # JupyterLab start + Run All of a notebook that imports torch and loads four models


def _lab_missing() -> str | None:
    reason = _missing()
    if reason: return reason
    if importlib.util.find_spec("jupyterlab") is None:
        return "Python package 'jupyterlab' not installed (python -m pip install -e '.[dev]')"
    return None


@pytest.fixture
def lab(tmp_path):
    "JupyterLab on 127.0.0.1 at a free port with a token, serving tmp_path/work; always stopped afterwards."
    reason = _lab_missing()
    if reason: pytest.skip(reason)
    import secrets
    work, token = tmp_path / "work", secrets.token_hex(16)
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("IN_TEST", "PYTEST_CURRENT_TEST")}
    env.update(MPLBACKEND="Agg", DISENTBOOK_OFFLINE="1", PYTHONUNBUFFERED="1", JUPYTER_PLATFORM_DIRS="1",
               JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"), OMP_NUM_THREADS="1")
    port, log = _free_port(), tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
                                 "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
                                 f"--ServerApp.root_dir={work}", "--ServerApp.port_retries=0",
                                 "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
                                + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
                                cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc, log)
        yield dict(url=f"http://127.0.0.1:{port}", token=token, work=work, log=log)
    finally:
        _stop(proc)


ALL_RUN_JS = """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
                        return p.length > 0 && p.every(t => /^\\[\\d+\\]:$/.test(t)); }"""


STARTED_JS = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""


def _open_and_run_all(page, lab, name: str, tmp_path):
    "Open work/name in JupyterLab, wait for the kernel, Run All, wait until every code cell has run."
    page.goto(f"{lab['url']}/lab/tree/{name}?token={lab['token']}", wait_until="domcontentloaded",
              timeout=LAB_TIMEOUT_S * 1000)
    try:
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LAB_TIMEOUT_S * 1000)
        page.wait_for_function("() => /\\|\\s*Idle/.test(document.querySelector('#jp-main-statusbar')"
                               "?.innerText || '')", timeout=LAB_TIMEOUT_S * 1000)
        for attempt in range(3):   # a Run All sent while the kernel connection settles can be dropped: retry
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            try:
                page.wait_for_function(STARTED_JS, timeout=20_000); break
            except Exception:
                page.keyboard.press("Escape")
        page.wait_for_function(ALL_RUN_JS, timeout=LAB_TIMEOUT_S * 1000)
    except Exception:
        page.screenshot(path=str(tmp_path / "lab-timeout.png"), full_page=True)
        pytest.fail(f"JupyterLab did not run {name} (screenshot {tmp_path / 'lab-timeout.png'}); log:\n"
                    f"{lab['log'].read_text()[-3000:]}")


def _pixels(locator) -> "np.ndarray":
    import io as _io
    import numpy as np
    from PIL import Image
    return np.asarray(Image.open(_io.BytesIO(locator.screenshot())).convert("L")).astype(float)


def test_jupyterlab_explorer_with_pretrained_model(lab, page, tmp_path):
    "Run All on the student notebook in JupyterLab; moving the first slider changes the decoded sprite visibly."
    import numpy as np
    shutil.copy(NBS / "exercises" / "00_explore_a_latent_space.ipynb", lab["work"] / "explore.ipynb")
    t0 = time.monotonic()
    _open_and_run_all(page, lab, "explore.ipynb", tmp_path)
    t_run = time.monotonic() - t0
    explorers = page.locator(".disentbook-latent-explorer")
    assert explorers.count() >= 3, "the β = 1, β = 4 and DIP-VAE explorers"
    first = explorers.first
    first.scroll_into_view_if_needed()
    image = first.locator("img.disentbook-latent-image")
    page.wait_for_function("(e) => e.complete && e.naturalWidth > 0", arg=image.element_handle())
    before = _pixels(image)
    src0 = image.get_attribute("src")
    handle = first.locator(".disentbook-latent-slider").first.locator(".noUi-handle")
    t1 = time.monotonic()
    handle.focus()
    for _ in range(30): handle.press("ArrowRight")       # +1.5 on the latent with the largest KL
    page.wait_for_function("([e, old]) => e.getAttribute('src') !== old", arg=[image.element_handle(), src0],
                           timeout=UI_TIMEOUT_S * 1000)
    time.sleep(1.0)                                        # the last key presses' renders
    after = _pixels(image)
    t_slider = time.monotonic() - t1
    diff = np.abs(after - before)
    page.screenshot(path=str(tmp_path / "lab-explorer.png"), full_page=False)
    print(f"JupyterLab: Run All {t_run:.1f} s, slider -> image {t_slider:.2f} s, mean |Δ| {diff.mean():.1f}, "
          f"pixels changed > 64: {(diff > 64).mean():.3f}; screenshot {tmp_path / 'lab-explorer.png'}")
    assert before.shape == after.shape and (diff > 64).mean() > 0.005 and diff.mean() > 1.0, \
        "moving the most informative latent must change the decoded sprite visibly"


def _set_cell_source(page, cell, source: str):
    "Replace the code of a notebook cell as a student would (click into it, select all, paste), then run it."
    editor = cell.locator(".cm-content").first
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)
    page.keyboard.press("Shift+Enter")


def test_jupyterlab_student_edition_feedback(lab, page, tmp_path):
    "Student edition in JupyterLab: Run All never stops; a wrong answer gets the targeted message, a right one passes and the old message is gone."
    from disentbook.cli import main
    assert main(["student-edition", str(NBS / "exercises" / "01_vae_exercises.ipynb"),
                 str(lab["work"] / "vae_student.ipynb")]) == 0
    _open_and_run_all(page, lab, "vae_student.ipynb", tmp_path)
    results = page.locator(".disentbook-check-result")
    if results.count() == 0:
        check_cell = page.locator(".jp-CodeCell", has_text="check(check_gaussian_kl").first
        page.screenshot(path=str(tmp_path / "lab-student.png"), full_page=False)
        pytest.fail("the check cells show no feedback widget in JupyterLab; the first check cell's output reads "
                    f"{check_cell.locator('.jp-OutputArea').inner_text()!r} (screenshot {tmp_path / 'lab-student.png'})")
    assert results.count() >= 3, "Run All reached every exercise's check (it never stops at exercise 1)"
    first = results.first
    assert "✗" in first.inner_text()
    cell = page.locator(".jp-CodeCell", has_text="def gaussian_kl_student").first
    wrong = ('def gaussian_kl_student(mu, logvar):\n'
             '    return 0.5 * (mu.pow(2) + logvar.exp() - logvar)\n')          # forgot the -1
    right = ('def gaussian_kl_student(mu, logvar):\n'
             '    return 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1)\n')
    check_button = page.locator("button.disentbook-check").first
    _set_cell_source(page, cell, wrong)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=UI_TIMEOUT_S * 1000)
    check_button.click()
    page.wait_for_function("(e) => e.innerText.includes('the prior itself')", arg=first.element_handle(),
                           timeout=UI_TIMEOUT_S * 1000)
    assert "✗" in first.inner_text()
    _set_cell_source(page, cell, right)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=UI_TIMEOUT_S * 1000)
    check_button.click()
    page.wait_for_function("(e) => e.innerText.includes('passed')", arg=first.element_handle(),
                           timeout=UI_TIMEOUT_S * 1000)
    text = first.inner_text()
    page.screenshot(path=str(tmp_path / "lab-student.png"), full_page=False)
    assert "✗" not in text and "the prior itself" not in text, f"the old message is still shown: {text!r}"
    # only one feedback area in that cell's output: the new verdict replaced the old one
    out = page.locator(".jp-CodeCell", has=page.locator(".disentbook-check-result")).first
    assert out.locator(".disentbook-feedback").count() == 1


# ---------------------------------------------------------------------------------------------------------------
# The static site (issue 26): what a reader without a kernel sees, opened from file:// with the network closed.

SITE_NOTEBOOKS = ["30_dipvae.ipynb", "exercises/00_explore_a_latent_space.ipynb"]   # a derivation, the explorer page
MATHS_SAMPLE = r"""# Maths sample

Inline $\mathbb{E}_{q_\phi(z\mid x)}[\log p_\theta(x\mid z)]$ and $\operatorname{Cov}(z) = \Sigma$, a display:

$$\mathrm{KL}\big(q_\phi(z)\,\|\,p(z)\big) = \sum_i \tfrac12\big(\sigma_i^2 + \mu_i^2 - 1 - \log \sigma_i^2\big)$$

and an aligned environment:

$$\begin{aligned} \mathcal L(\theta, \phi) &= \mathbb{E}[\log p_\theta(x\mid z)] - \beta\,\mathrm{KL} \\
&\le \log p_\theta(x) \end{aligned}$$

$$\begin{pmatrix} 1 & \rho \\ \rho & 1 \end{pmatrix}$$
"""


def _site_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not found (install Debian's chromium and chromium-driver, as .ci/run does)"
    for mod in ("playwright", "nbclient", "nbconvert", "jupyter_server_mathjax"):
        if importlib.util.find_spec(mod) is None:
            return f"Python package {mod!r} not installed (python -m pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    "The two pages built at reader settings (executed; pretrained models), and a maths sample page (not executed)."
    reason = _site_missing()
    if reason: pytest.skip(reason)
    import nbformat
    spec = importlib.util.spec_from_file_location("build_site", NBS.parent / "tools" / "build_site.py")
    site = importlib.util.module_from_spec(spec); spec.loader.exec_module(site)
    tmp = tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DISENTBOOK_OFFLINE", "1"); mp.setenv("DISENTBOOK_DATA", str(tmp / "data"))
        mp.setenv("OMP_NUM_THREADS", "1"); mp.delenv("IN_TEST", raising=False)
        t0 = time.monotonic()
        pages = site.build([NBS / n for n in SITE_NOTEBOOKS], tmp / "site")
        t_build = time.monotonic() - t0
    sample = tmp / "maths_sample.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(MATHS_SAMPLE)]), str(sample))
    site.build([sample], tmp / "maths", execute=False)
    print(f"site of {len(pages)} pages built in {t_build:.1f} s at reader settings")
    return dict(out=tmp / "site", pages=pages, maths=tmp / "maths" / "maths_sample.html", seconds=t_build)


@pytest.fixture
def offline_page(tmp_path):
    "Headless Chromium whose every request is recorded; any request that would leave the machine is aborted."
    reason = _site_missing()
    if reason: pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    requests, remote = [], []
    def route(r):
        url = r.request.url
        if url.startswith(("file:", "data:", "about:", "blob:")): r.continue_()
        else: remote.append(url); r.abort()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        ctx = browser.new_context(viewport=dict(width=1280, height=900))
        try:
            ctx.route("**/*", route)
            pg = ctx.new_page()
            pg.on("request", lambda r: requests.append(r.url))
            pg.set_default_timeout(UI_TIMEOUT_S * 1000)
            yield pg, requests, remote
        finally:
            ctx.close(); browser.close()


RAW_TEX_JS = """() => [...document.querySelectorAll('.jp-RenderedMarkdown, .jp-RenderedHTMLCommon')]
                      .map(e => e.innerText).join('\\n')"""
IMAGES_JS = """() => [...document.querySelectorAll('main img')].map(i => ({src: i.getAttribute('src').slice(0, 30),
                                                                       ok: i.complete && i.naturalWidth > 0}))"""


def _read(page, url: str, shot: Path | None = None, focus: str | None = None) -> dict:
    "Open `url`, wait for MathJax, return what a reader sees: visible text, maths, images (screenshot at `focus`)."
    t0 = time.monotonic()
    page.goto(url, wait_until="load")
    page.wait_for_selector("html[data-mathjax=done]", state="attached", timeout=60_000)
    seen = dict(seconds=time.monotonic() - t0, text=page.evaluate(RAW_TEX_JS), images=page.evaluate(IMAGES_JS),
                tex=page.evaluate("() => [...document.querySelectorAll('script[type^=\"math/tex\"]')].map(s => s.text)"),
                rendered=page.locator(".MathJax, .MathJax_Display").count(),
                errors=page.locator(".MathJax_Error, .MathJax .merror, .MathJax .noError").count(),
                prev=page.locator("a.site-prev").count(), next=page.locator("a.site-next").count(),
                sidebar=page.locator("#site-sidebar a").count())
    if focus is not None and page.locator(focus).count():
        page.locator(focus).first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.evaluate("() => window.scrollBy(0, -60)")
    if shot is not None: page.screenshot(path=str(shot), full_page=False)
    return seen


def _assert_typeset(seen: dict, where: str):
    raw = re.findall(r"\$\$.+?\$\$|\$[^$\n]+\$", seen["text"], re.S)
    assert not raw, f"{where}: raw LaTeX left in the visible text: {raw[:3]}"
    assert seen["tex"] and seen["rendered"] >= len(seen["tex"]), (where, len(seen["tex"]), seen["rendered"])
    assert seen["errors"] == 0, f"{where}: {seen['errors']} MathJax errors"


def test_site_pages_render_offline(built_site, offline_page, tmp_path):
    "A derivation page and the explorer page: typeset maths, every figure loaded, navigation, nothing fetched remotely."
    page, requests, remote = offline_page
    out = built_site["out"]
    shots = {}
    for p in built_site["pages"]:
        shot = tmp_path / (Path(p["page"]).stem + ".png")
        focus = "main img" if "explore" in p["page"] else ".MathJax_Display"   # the first explorer, the first display
        seen = _read(page, (out / p["page"]).as_uri(), shot, focus)
        shots[p["page"]] = shot
        _assert_typeset(seen, p["page"])
        bad = [i for i in seen["images"] if not i["ok"]]
        assert seen["images"] and not bad, f"{p['page']}: images that did not load: {bad}"
        assert len(seen["images"]) == p["figures"], (p["page"], len(seen["images"]), p["figures"])
        assert seen["sidebar"] >= len(built_site["pages"]) + 1 and seen["prev"] + seen["next"] >= 2
        print(f"{p['page']}: {len(seen['tex'])} equations typeset, {len(seen['images'])} figures, "
              f"loaded and typeset in {seen['seconds']:.1f} s; screenshot {shot}")
    dip = _read(page, (out / "30_dipvae.html").as_uri())
    assert any(r"\mathbb" in t for t in dip["tex"]) and any(r"\operatorname" in t for t in dip["tex"])
    assert len(dip["tex"]) >= 50, "the derivation's equations are there"
    # the explorer page: the widgets' static faces (one picture per explorer and the traversal viewer)
    explorer = next(p for p in built_site["pages"] if "explore" in p["page"])
    assert explorer["figures"] >= 6
    # the contents page and a page reached by its next link
    page.goto((out / "index.html").as_uri())
    page.locator("#site-main a", has_text="Explore a latent space").first.click()
    page.wait_for_selector("html[data-mathjax=done]", state="attached")
    page.locator("a.site-next").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/30_dipvae.html")
    assert not remote, f"requests that would have left the machine: {remote[:5]}"
    assert all(u.startswith(("file:", "data:", "about:", "blob:")) for u in requests)
    print(f"{len(requests)} requests, all local; build {built_site['seconds']:.1f} s; screenshots {sorted(map(str, shots.values()))}")
    for d in filter(None, [os.environ.get("DISENTBOOK_SCREENSHOTS")]):
        Path(d).mkdir(parents=True, exist_ok=True)
        for s in shots.values(): shutil.copy(s, Path(d) / s.name)


def test_site_maths_sample(built_site, offline_page, tmp_path):
    r"Inline and display maths, \mathbb, \operatorname, aligned and pmatrix environments typeset without error."
    page, _, remote = offline_page
    shot = tmp_path / "maths_sample.png"
    seen = _read(page, built_site["maths"].as_uri(), shot)
    _assert_typeset(seen, "maths sample")
    assert len(seen["tex"]) == 5 and page.locator(".MathJax_Display").count() == 3
    assert not remote
    print(f"maths sample typeset in {seen['seconds']:.1f} s; screenshot {shot}")
