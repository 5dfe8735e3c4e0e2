"""The static site of the notebooks (tools/build_site.py): executed pages with their figures, slow/cuda cells and
nbdev_export calls skipped, an index."""
import importlib.util, json
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_site", ROOT / "tools" / "build_site.py")
site = importlib.util.module_from_spec(spec); spec.loader.exec_module(site)


def test_flags_and_prepare():
    assert site.cell_flags("#| slow\n#| hide\nx = 1") == {"slow", "hide"}
    assert site.cell_flags("x = 1\n#| slow") == set()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("#| slow\nrun_long()"), nbformat.v4.new_code_cell("#| cuda\ngpu()"),
                                         nbformat.v4.new_code_cell("#| hide\nimport nbdev; nbdev.nbdev_export()"),
                                         nbformat.v4.new_code_cell("x = 1")])
    assert [c.source for c in site.prepare(nb, set()).cells] == ["x = 1"]
    assert len(site.prepare(nb, {"slow"}).cells) == 2


def test_builds_executed_pages_with_figures(tmp_path, clean_env, monkeypatch):
    for k, v in clean_env.items(): monkeypatch.setenv(k, v)
    nbs = [ROOT / "nbs" / "01a_dsprites.ipynb", ROOT / "nbs" / "exercises" / "01_vae_exercises.ipynb"]
    pages = site.build(nbs, tmp_path / "site")
    assert (tmp_path / "site" / "index.html").exists() and json.loads((tmp_path / "site" / "pages.json").read_text())
    viz = next(p for p in pages if p["notebook"] == "01a_dsprites.ipynb")
    assert viz["figures"] >= 1, "the executed viz page shows its figures"
    text = (tmp_path / "site" / viz["page"]).read_text()
    assert "data:image/png;base64" in text and "nbdev_export()" not in text
    assert (tmp_path / "site" / "exercises" / "01_vae_exercises.html").exists()
    assert "01_vae_exercises.html" in (tmp_path / "site" / "index.html").read_text()
