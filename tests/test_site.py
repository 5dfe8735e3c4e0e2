"""The static site of the notebooks (tools/build_site.py): executed pages with their figures, slow/cuda cells and
nbdev_export calls skipped, pages in the course's order with a sidebar and previous / next links, MathJax copied into
the site (nothing loaded from the network), widgets shown by their static face. What a reader sees in Chromium is
tested in tests/test_browser.py."""
import importlib.util, json, re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_site", ROOT / "tools" / "build_site.py")
site = importlib.util.module_from_spec(spec); spec.loader.exec_module(site)
v4 = nbformat.v4


def test_flags_and_prepare():
    assert site.cell_flags("#| slow\n#| hide\nx = 1") == {"slow", "hide"}
    assert site.cell_flags("x = 1\n#| slow") == set()
    nb = v4.new_notebook(cells=[v4.new_code_cell("#| slow\nrun_long()"), v4.new_code_cell("#| cuda\ngpu()"),
                                v4.new_code_cell("#| hide\nimport nbdev; nbdev.nbdev_export()"), v4.new_code_cell("x = 1")])
    assert [c.source for c in site.prepare(nb, set()).cells] == ["x = 1"]
    assert len(site.prepare(nb, {"slow"}).cells) == 2


def test_course_order_sections_and_library_last():
    every = sorted((ROOT / "nbs").rglob("*.ipynb"))
    order = site.course_order(every)
    keys = [e["rel"].with_suffix("").as_posix() for e in order]
    assert sorted(keys) == sorted(p.relative_to(ROOT / "nbs").with_suffix("").as_posix() for p in every), "each once"
    named = [k for _, entries in site.COURSE for k, _ in entries]
    missing = [k for k in named if not (ROOT / "nbs" / f"{k}.ipynb").exists()]
    assert not missing, f"the course names notebooks that do not exist: {missing}"
    sections = list(dict.fromkeys(e["section"] for e in order))
    assert sections[:3] == ["Start here", "Foundations: the VAE from scratch", "Measuring disentanglement"]
    assert sections[-1] == site.LIBRARY and len(sections) == 3 + 5 + 1, "five papers between the metrics and the library"
    for section, entries in site.COURSE[3:]:          # every paper: derivation first, reproduction, exercises last
        kinds = [k for _, k in entries]
        assert kinds[0] == "derivation" and kinds[-1] == "exercises" and kinds[-2] == "reproduction", section
    lib = [e["rel"].as_posix() for e in order if e["section"] == site.LIBRARY]
    assert lib == sorted(lib) and "00_core.ipynb" in lib and "90_cli.ipynb" in lib
    # a subset keeps the same relative order; nbs/index.ipynb becomes overview.html (index.html is the contents)
    sub = site.course_order([ROOT / "nbs" / "90_cli.ipynb", ROOT / "nbs" / "30_dipvae.ipynb", ROOT / "nbs" / "10_vae.ipynb"])
    assert [e["rel"].as_posix() for e in sub] == ["10_vae.ipynb", "30_dipvae.ipynb", "90_cli.ipynb"]
    assert site.page_of(Path("index.ipynb")) == "overview.html"
    assert site.page_of(Path("exercises/01_vae_exercises.ipynb")) == "exercises/01_vae_exercises.html"


def test_for_readers_shows_static_faces_and_hides_directives():
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2, "version_minor": 0}}
    face = v4.new_output("display_data", data={**widget, "text/plain": "HBox()", "image/png": "iVBORw0KGgo="})
    bare = v4.new_output("display_data", data={**widget, "text/plain": "VBox(children=...)"})
    text = v4.new_output("stream", text="hello\n")
    nb = v4.new_notebook(cells=[v4.new_code_cell("#| default_exp x"), v4.new_code_cell("#| hide\nimport x"),
                                v4.new_code_cell("#| export\ndef f(): pass"),
                                v4.new_code_cell("explorer", outputs=[face, bare, text])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    out = site.for_readers(nb)
    assert [c.source for c in out.cells] == ["#| export\ndef f(): pass", "explorer"]
    outs = out.cells[1].outputs
    assert len(outs) == 2 and set(outs[0].data) == {"text/plain", "image/png"} and outs[1].output_type == "stream"
    assert "widgets" not in out.metadata


def _rel_links(text: str, rel: str) -> list[str]:
    "The href of every <a rel=REL> (top and bottom navigation), whatever the attribute order."
    return [re.search(r'href="([^"]*)"', a).group(1) for a in re.findall(r"<a\b[^>]*>", text) if f'rel="{rel}"' in a]


def test_pages_offline_with_sidebar_and_links(tmp_path):
    "Unexecuted pages (fast): MathJax copied in, no URL leaves the site, sidebar and previous / next resolve."
    nbs = [ROOT / "nbs" / n for n in ("30_dipvae.ipynb", "10_vae.ipynb", "exercises/02_dipvae_exercises.ipynb")]
    out = tmp_path / "site"
    pages = site.build(nbs, out, execute=False)
    assert [p["page"] for p in pages] == ["10_vae.html", "30_dipvae.html", "exercises/02_dipvae_exercises.html"]
    assert (out / "mathjax" / "MathJax.js").is_file() and not (out / "mathjax" / "localization" / "de").exists()
    meta = json.loads((out / "pages.json").read_text())
    assert meta["settings"] == "reader" and [p["section"] for p in meta["pages"]] == ["Foundations: the VAE from scratch",
                                                                                      "DIP-VAE", "DIP-VAE"]
    for p in pages:
        page = out / p["page"]
        text = page.read_text()
        # what a page loads (scripts, images, style sheets, frames) is in the site: nothing comes from the network
        loads = re.findall(r'<(?:script|img|link|iframe|source)\b[^>]*?(?:src|href)="([^"]*)"', text)
        remote = [u for u in loads if re.match(r"[a-z]+:", u) and not u.startswith("data:") or u.startswith("//")]
        assert not remote, (p["page"], remote)
        links = loads + re.findall(r'<a\b[^>]*?href="([^"]*)"', text)
        local = [u.split("?")[0].split("#")[0] for u in links if u and not re.match(r"[a-z]+:|#", u)]
        assert all((page.parent / u).exists() for u in local), [u for u in local if not (page.parent / u).exists()]
        assert "cdnjs" not in text and "unpkg" not in text and "require.min.js" not in text
        assert 'id="site-sidebar"' in text and text.count('class="site-nav') == 2
        assert "mathjax/MathJax.js" in text and "#| default_exp" not in text
    dip = (out / "30_dipvae.html").read_text()
    assert _rel_links(dip, "prev") == ["10_vae.html"] * 2 and _rel_links(dip, "next") == ["exercises/02_dipvae_exercises.html"] * 2
    ex = (out / "exercises" / "02_dipvae_exercises.html").read_text()
    assert _rel_links(ex, "prev") == ["../30_dipvae.html"] * 2 and not _rel_links(ex, "next") and 'src="../mathjax/MathJax.js' in ex
    assert r"\mathbb" in dip, "the TeX is left for MathJax, which typesets it in the browser"
    index = (out / "index.html").read_text()
    assert index.index("Foundations") < index.index("DIP-VAE") and 'href="exercises/02_dipvae_exercises.html"' in index


def test_builds_executed_pages_with_figures(tmp_path, clean_env, monkeypatch):
    for k, v in clean_env.items(): monkeypatch.setenv(k, v)
    nbs = [ROOT / "nbs" / "01a_dsprites.ipynb", ROOT / "nbs" / "exercises" / "01_vae_exercises.ipynb"]
    pages = site.build(nbs, tmp_path / "site", full=False)
    assert (tmp_path / "site" / "index.html").exists() and json.loads((tmp_path / "site" / "pages.json").read_text())
    viz = next(p for p in pages if p["notebook"] == "01a_dsprites.ipynb")
    assert viz["figures"] >= 1, "the executed viz page shows its figures"
    text = (tmp_path / "site" / viz["page"]).read_text()
    assert 'src="data:image/png;base64' in text and "nbdev_export()" not in text
    assert (tmp_path / "site" / "exercises" / "01_vae_exercises.html").exists()
    assert "01_vae_exercises.html" in (tmp_path / "site" / "index.html").read_text()


def test_widget_pages_show_the_static_face(tmp_path, clean_env, monkeypatch):
    "An executed explorer and traversal viewer appear on the page as pictures, with no widget script left."
    for k, v in clean_env.items(): monkeypatch.setenv(k, v)
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# Explorer page\n\nMaths: $\\mathbb{E}[z]$."), v4.new_code_cell(
        "import torch\nfrom disentbook.nets import VAE\nfrom disentbook.classroom.widgets import LatentExplorer, "
        "traversal_viewer\ntorch.manual_seed(0)\nm = VAE(image_size=28, latent_dim=3).eval()\n"
        "x = torch.randint(0, 256, (4, 1, 28, 28), dtype=torch.uint8)\nLatentExplorer(m, x)"),
        v4.new_code_cell("traversal_viewer(m, x, n_steps=5)")])
    nb.metadata["kernelspec"] = dict(name="python3", display_name="Python 3", language="python")
    path = tmp_path / "explorer.ipynb"; nbformat.write(nb, str(path))
    pages = site.build([path], tmp_path / "site")
    text = (tmp_path / "site" / "explorer.html").read_text()
    assert pages[0]["figures"] == 2, "one picture per widget"
    assert "widget-view+json" not in text and "widget-state" not in text and "HBox(children" not in text


def test_a_failing_notebook_is_reported_not_hidden(tmp_path, clean_env, monkeypatch, capsys):
    "The command builds every page, shows the error on the failing one, lists it and exits 1."
    for k, v in clean_env.items(): monkeypatch.setenv(k, v)
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# Broken"), v4.new_code_cell("print('before')"),
                                v4.new_code_cell("1 / 0"), v4.new_code_cell("print('never')")])
    nb.metadata["kernelspec"] = dict(name="python3", display_name="Python 3", language="python")
    path = tmp_path / "broken.ipynb"; nbformat.write(nb, str(path))
    assert site.main([str(path), "--out", str(tmp_path / "site")]) == 1
    assert "1 notebook(s) failed: broken.ipynb" in capsys.readouterr().err
    text = (tmp_path / "site" / "broken.html").read_text()
    assert "<pre>before" in text and "ZeroDivisionError" in text and "<pre>never" not in text, "outputs up to the error"
    meta = json.loads((tmp_path / "site" / "pages.json").read_text())
    assert "ZeroDivisionError" in meta["pages"][0]["error"]
    with pytest.raises(Exception, match="ZeroDivisionError"): site.build([path], tmp_path / "site2")
    assert site.main([str(tmp_path / "missing.ipynb")]) == 2
