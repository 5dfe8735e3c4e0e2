#!/usr/bin/env python3
"""Build the static site of disentbook's notebooks: one HTML page per notebook, executed so that every page shows its
figures, in the course's order, each with a sidebar and previous / next links; readable offline.

    python3 tools/build_site.py                      # every notebook in nbs/, reader settings, into _site/
    python3 tools/build_site.py --out site nbs/30_dipvae.ipynb nbs/exercises/00_explore_a_latent_space.ipynb
    python3 tools/build_site.py --test-settings      # the notebooks' IN_TEST settings (smaller, faster)
    python3 tools/build_site.py --no-execute         # render the notebooks as committed (no outputs)

Reader settings are what a student's Run All does (no `IN_TEST`; the notebooks load the pretrained models and the
committed reports, `TRAIN = False`). Cells flagged `#| slow` or `#| cuda` are skipped, as `nbdev_test` skips them
(`--flags slow` runs them), and so are cells that call `nbdev_export` (a site build never rewrites the package).

Offline: the pages load nothing from the network. Equations are typeset by the MathJax 2.7 that the Python package
`jupyter-server-mathjax` ships (a dev requirement), copied into `OUT/mathjax/`; require.js, the widget renderer and
mermaid (which nbconvert's template loads from CDNs) are left out. A widget cannot run without a kernel, so the page
shows the widget's static face instead (`classroom.widgets`: a PNG beside the widget in the display data).
Open `OUT/index.html` in a browser (a `file://` URL works; so does `python3 -m http.server -d OUT`).
"""
from __future__ import annotations

import argparse, copy, html, json, os, re, shutil, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
_DIRECTIVE = re.compile(r"^\s*#\|\s*(.*)$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# The course: the README's sections in order; inside a paper, derivation → (its data and metrics) → reproduction →
# exercises. Notebooks not named here come last, in "The library", in file order.
COURSE = [
    ("Start here", [("index", "overview"), ("exercises/00_explore_a_latent_space", "explorer")]),
    ("Foundations: the VAE from scratch", [("10_vae", "derivation"), ("11_vae_reproduction", "reproduction"),
                                           ("exercises/01_vae_exercises", "exercises")]),
    ("Measuring disentanglement", [("20_eval_metrics", "metrics"), ("21_eval_scores", "metrics"), ("22_eval_protocols", "metrics")]),
    ("DIP-VAE", [("30_dipvae", "derivation"), ("32_dipvae_metrics", "metrics"), ("31_dipvae_reproduction", "reproduction"),
                 ("exercises/02_dipvae_exercises", "exercises")]),
    ("TCWAE", [("40_tcwae", "derivation"), ("41_tcwae_reproduction", "reproduction"),
               ("exercises/03_tcwae_exercises", "exercises")]),
    ("Contrastive disentanglement", [("50_contrastive", "derivation"), ("51_grassy", "data"),
                                     ("52_contrastive_reproduction", "reproduction"),
                                     ("exercises/04_contrastive_exercises", "exercises")]),
    ("Reference-based VAEs", [("60_refvae", "derivation"), ("01h_digit_style", "data"),
                              ("61_refvae_reproduction", "reproduction"), ("exercises/05_refvae_exercises", "exercises")]),
    ("Reconstruction for disentanglement, contrast for invariance",
     [("70_invariance", "derivation"), ("01i_shapes3d", "data"), ("01j_colored_mnist", "data"),
      ("71_invariance_reproduction", "reproduction"), ("exercises/06_invariance_exercises", "exercises")]),
]
LIBRARY = "The library"


def cell_flags(source: str) -> set[str]:
    "The nbdev directives of a cell (`#| slow`, `#| cuda`, `#| hide`, ...) as a set of words."
    out = set()
    for line in source.splitlines():
        m = _DIRECTIVE.match(line)
        if not m: break
        out.update(m.group(1).split())
    return out


def prepare(nb, flags: set[str]):
    "A copy of `nb` without the cells a site build must not run (other flags' slow/cuda cells, nbdev_export calls)."
    nb = copy.deepcopy(nb)
    keep = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            f = cell_flags(cell.source)
            if ({"slow", "cuda"} & f) - flags or "nbdev_export" in cell.source: continue
        keep.append(cell)
    nb.cells = keep
    return nb


def for_readers(nb):
    """The executed `nb` as a page shows it: every widget view replaced by its static face (the widget mime type is
    dropped: no kernel, no widget renderer on a static page, so the PNG or HTML beside it shows; an output left with
    only its text repr, 'VBox(children=...)', is dropped, and so is the stored widget state); `#| hide` cells and
    cells holding only nbdev directives (`#| default_exp ...`) left out, as nbdev's own docs do."""
    nb.metadata.pop("widgets", None)
    keep = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines = [l for l in cell.source.splitlines() if l.strip()]
            if "hide" in cell_flags(cell.source) or all(_DIRECTIVE.match(l) for l in lines): continue
        keep.append(cell)
    nb.cells = keep
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        outs = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data is not None and WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)
                if set(data) <= {"text/plain"}: continue
            outs.append(out)
        cell.outputs = outs
    return nb


def title_of(nb, path: Path) -> str:
    "The notebook's first markdown heading, else its file name."
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m: return m.group(1).strip()
    return path.stem


def _rel(path: Path) -> Path:
    path = Path(path).resolve()
    return path.relative_to(NBS) if path.is_relative_to(NBS) else Path(path.name)


def page_of(rel: Path) -> str:
    "The page a notebook becomes (`nbs/index.ipynb` becomes overview.html: index.html is the site's contents)."
    rel = Path(rel).with_suffix(".html")
    return "overview.html" if str(rel) == "index.html" else rel.as_posix()


def course_order(notebooks: list[Path]) -> list[dict]:
    "`notebooks` in the course's order: one dict per notebook with path, rel, section and kind."
    notebooks = [Path(n).resolve() for n in notebooks]
    by_key = {_rel(n).with_suffix("").as_posix(): n for n in notebooks}
    out, seen = [], set()
    for section, entries in COURSE:
        for key, kind in entries:
            if key in by_key:
                out.append(dict(path=by_key[key], rel=_rel(by_key[key]), section=section, kind=kind)); seen.add(key)
    rest = sorted((k for k in by_key if k not in seen), key=lambda k: (k.startswith("exercises/"), k))
    out += [dict(path=by_key[k], rel=_rel(by_key[k]), section=LIBRARY, kind="exercises" if k.startswith("exercises/")
                 else "library") for k in rest]
    return out


def mathjax_dir() -> Path:
    "The MathJax 2.7 tree shipped by the `jupyter-server-mathjax` package (a dev requirement)."
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise SystemExit("error: the site typesets equations with the MathJax of the Python package "
                         "jupyter-server-mathjax; install it: python3 -m pip install -e '.[dev]'") from None
    d = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (d / "MathJax.js").is_file(): raise SystemExit(f"error: no MathJax.js in {d}")
    return d


def copy_mathjax(out: Path) -> Path:
    "Copy MathJax (without its 2 MB of translations) into `out/mathjax`; returns that folder."
    src, dst = mathjax_dir(), out / "mathjax"
    def ignore(folder, names):
        return [n for n in names if Path(folder).name == "localization" and n != "en"]
    shutil.copytree(src, dst, ignore=ignore, dirs_exist_ok=True)
    return dst


# MathJax 2 from the site's own copy: TeX input (the notebooks' $…$, $$…$$, \begin{…}), HTML-CSS output with the
# STIX web fonts it ships; when typesetting ends, <html data-mathjax="done"> (the browser test waits for it).
MATHJAX = """
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
            processEscapes: true, processEnvironments: true},
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               linebreaks: {automatic: true}},
  displayAlign: "center", messageStyle: "none", showMathMenu: false,
  menuSettings: {zoom: "None"}
});
MathJax.Hub.Queue(function () { document.documentElement.setAttribute("data-mathjax", "done"); });
</script>
<script src="{root}mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"></script>
"""

CSS = """
body.jp-Notebook { margin: 0; }
#site-sidebar { position: fixed; top: 0; left: 0; bottom: 0; width: 270px; overflow-y: auto; padding: 12px 10px 40px 14px;
  box-sizing: border-box; background: #f6f7f9; border-right: 1px solid #dde; font: 13px/1.35 system-ui, sans-serif; }
#site-sidebar h2 { font-size: 15px; margin: 4px 0 10px; } #site-sidebar h2 a { color: #222; text-decoration: none; }
#site-sidebar h3 { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: #667; margin: 14px 0 4px; }
#site-sidebar ul { list-style: none; margin: 0; padding: 0; } #site-sidebar li { margin: 2px 0; }
#site-sidebar a { color: #1a4d8f; text-decoration: none; } #site-sidebar a:hover { text-decoration: underline; }
#site-sidebar li.current > a { font-weight: bold; color: #000; }
.site-kind { display: inline-block; font-size: 10px; color: #556; background: #e4e7ee; border-radius: 3px; padding: 0 4px;
  margin-left: 4px; vertical-align: 1px; }
#site-main { margin-left: 270px; }
.site-nav { display: flex; justify-content: space-between; gap: 12px; padding: 8px 24px; font: 13px system-ui, sans-serif;
  border-bottom: 1px solid #eee; } .site-nav.bottom { border-top: 1px solid #eee; border-bottom: 0; margin-top: 24px; }
.site-nav a { color: #1a4d8f; text-decoration: none; } .site-nav .site-section { color: #667; }
.jp-OutputArea-output img { max-width: min(100%, 900px); height: auto; }
@media (max-width: 800px) { #site-sidebar { position: static; width: auto; } #site-main { margin-left: 0; } }
"""

TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}{{ resources.site.mathjax }}{%- endblock html_head_js_mathjax -%}
{% block extra_css %}<style type="text/css">{{ resources.site.css }}</style>{% endblock extra_css %}
{%- block body_header -%}
<body class="jp-Notebook" data-jp-theme-light="true" data-jp-theme-name="JupyterLab Light">
{{ resources.site.sidebar }}
<div id="site-main">{{ resources.site.nav_top }}
<main>
{%- endblock body_header -%}
{% block body_footer %}
</main>{{ resources.site.nav_bottom }}</div>
</body>
{% endblock body_footer %}
"""


def _link(root: str, page: dict) -> str:
    return f'<a href="{html.escape(root + page["page"])}">{html.escape(page["title"])}</a>'


def sidebar(pages: list[dict], current: dict | None, root: str) -> str:
    "The sidebar: the site's title, then each section with its pages (the current one in bold)."
    parts = [f'<nav id="site-sidebar"><h2><a href="{root}index.html">disentbook</a></h2>']
    section = None
    for p in pages:
        if p["section"] != section:
            if section is not None: parts.append("</ul>")
            section = p["section"]; parts.append(f"<h3>{html.escape(section)}</h3><ul>")
        cls = ' class="current"' if current is not None and p["page"] == current["page"] else ""
        parts.append(f'<li{cls}>{_link(root, p)}<span class="site-kind">{html.escape(p["kind"])}</span></li>')
    parts.append("</ul></nav>" if section is not None else "</nav>")
    return "".join(parts)


def nav(pages: list[dict], i: int, root: str, where: str) -> str:
    "Previous / next links (and the section) of page `i`."
    prev = f'<a class="site-prev" rel="prev" href="{html.escape(root + pages[i - 1]["page"])}">← {html.escape(pages[i - 1]["title"])}</a>' \
        if i > 0 else '<span></span>'
    nxt = f'<a class="site-next" rel="next" href="{html.escape(root + pages[i + 1]["page"])}">{html.escape(pages[i + 1]["title"])} →</a>' \
        if i + 1 < len(pages) else '<span></span>'
    mid = f'<span class="site-section">{html.escape(pages[i]["section"])} · <a href="{root}index.html">contents</a></span>'
    return f'<div class="site-nav {where}">{prev}{mid}{nxt}</div>'


def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"disentbook_site.html.j2": TEMPLATE})],
                        template_file="disentbook_site.html.j2")


def build(notebooks: list[Path], out: Path, execute: bool = True, full: bool = True, flags: set[str] = frozenset(),
          timeout: int = 900, keep_going: bool = False) -> list[dict]:
    """Render `notebooks` into `out` in the course's order: one HTML page each (sidebar, previous / next), MathJax in
    `out/mathjax`, index.html (the contents by section) and pages.json; returns one dict per page. `full=True` runs
    the notebooks at reader settings, `full=False` with `IN_TEST=1` (their small settings). A notebook that fails
    raises, unless `keep_going`: then its page shows the outputs up to the error and its dict has `error`."""
    import nbformat
    from nbclient import NotebookClient
    t_all = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    copy_mathjax(out)
    exporter = _exporter()
    pages = []
    for entry in course_order(notebooks):   # titles first: every page's sidebar lists all of them
        nb = nbformat.read(entry["path"], as_version=4)
        pages.append(dict(notebook=entry["rel"].as_posix(), page=page_of(entry["rel"]), title=title_of(nb, entry["path"]),
                          section=entry["section"], kind=entry["kind"], path=entry["path"]))
    env_before = {k: os.environ.get(k) for k in ("IN_TEST", "MPLBACKEND")}
    try:
        os.environ.pop("MPLBACKEND", None)            # a non-interactive backend would hide the figures
        if not full: os.environ["IN_TEST"] = "1"
        else: os.environ.pop("IN_TEST", None)
        for i, p in enumerate(pages):
            t0 = time.perf_counter()
            path = p.pop("path")
            nb = prepare(nbformat.read(path, as_version=4), set(flags))
            error = None
            if execute:
                try:
                    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                   resources={"metadata": {"path": str(path.parent)}}).execute()
                except Exception as e:  # the page shows the outputs up to the failing cell (its traceback included)
                    if not keep_going: raise
                    error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
            nb = for_readers(nb)
            root = "../" * p["page"].count("/")
            site = dict(mathjax=MATHJAX.replace("{root}", root), css=CSS, sidebar=sidebar(pages, p, root),
                        nav_top=nav(pages, i, root, "top"), nav_bottom=nav(pages, i, root, "bottom"))
            body, _ = exporter.from_notebook_node(nb, resources=dict(site=site, metadata=dict(name=p["title"])))
            dst = out / p["page"]
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(body, encoding="utf-8")
            p.update(seconds=round(time.perf_counter() - t0, 1), figures=body.count("src=\"data:image/png"))
            if error: p["error"] = error
            print(f"{p['notebook']}: {p['seconds']} s, {p['figures']} figures" + (f"; FAILED: {error}" if error else ""),
                  flush=True)
    finally:
        for k, v in env_before.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    write_index(pages, out)
    total = round(time.perf_counter() - t_all, 1)
    (out / "pages.json").write_text(json.dumps(dict(pages=pages, seconds=total, settings="reader" if full else "IN_TEST",
                                                    executed=execute), indent=1), encoding="utf-8")
    return pages


def write_index(pages: list[dict], out: Path):
    "index.html: the contents, section by section, with the sidebar."
    body, section = [], None
    for p in pages:
        if p["section"] != section:
            if section is not None: body.append("</ul>")
            section = p["section"]; body.append(f"<h2>{html.escape(section)}</h2><ul>")
        body.append(f'<li>{_link("", p)} <span class="site-kind">{html.escape(p["kind"])}</span> '
                    f'<small>({html.escape(p["notebook"])})</small></li>')
    if section is not None: body.append("</ul>")
    (out / "index.html").write_text(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>disentbook</title>"
        f"<style>{CSS} #site-main {{ padding: 8px 28px; font: 15px/1.45 system-ui, sans-serif; }}</style></head><body>"
        f"{sidebar(pages, None, '')}<div id='site-main'><h1>disentbook: the notebooks</h1>"
        "<p>Derivations checked step by step, reproductions of five papers, exercises; executed, readable offline. "
        "Start with the overview and the latent explorer, then follow <i>next</i>.</p>"
        f"{''.join(body)}</div></body></html>", encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("notebooks", nargs="*", help="notebooks to render (default: every notebook in nbs/)")
    p.add_argument("--out", default="_site", help="output folder")
    p.add_argument("--no-execute", action="store_true", help="render without executing")
    p.add_argument("--test-settings", action="store_true", help="execute with IN_TEST=1 (the notebooks' small settings)")
    p.add_argument("--full", action="store_true", help="reader settings (the default; kept for old command lines)")
    p.add_argument("--flags", default="", help="also run cells with these flags, e.g. 'slow'")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    a = p.parse_args(argv)
    if a.full and a.test_settings: print("error: --full and --test-settings contradict each other", file=sys.stderr); return 2
    nbs = [Path(n).resolve() for n in a.notebooks] or sorted(NBS.rglob("*.ipynb"))
    nbs = [n for n in nbs if ".ipynb_checkpoints" not in n.parts]
    missing = [str(n) for n in nbs if not n.is_file()]
    if missing: print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr); return 2
    t0 = time.perf_counter()
    pages = build(nbs, Path(a.out), execute=not a.no_execute, full=not a.test_settings, flags=set(a.flags.split()),
                  timeout=a.timeout, keep_going=True)
    print(f"{len(pages)} pages in {time.perf_counter() - t0:.0f} s; open {Path(a.out) / 'index.html'}")
    failed = [p["notebook"] for p in pages if p.get("error")]
    if failed: print(f"error: {len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr); return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
