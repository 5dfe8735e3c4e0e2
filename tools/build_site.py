#!/usr/bin/env python3
"""Build the static site of disentbook's notebooks: one HTML page per notebook, executed so that every page shows its
figures, and an index page. Offline; needs only nbconvert/nbclient (installed with the `dev` extra).

    python3 tools/build_site.py                      # all notebooks in nbs/, executed, into _site/
    python3 tools/build_site.py --out site nbs/10_vae.ipynb nbs/05_viz.ipynb
    python3 tools/build_site.py --no-execute         # render the notebooks as committed (no outputs)
    python3 tools/build_site.py --full               # execute without IN_TEST (the notebooks' full settings)

Cells flagged `#| slow` or `#| cuda` are skipped, as `nbdev_test` skips them (`--flags slow` runs them), and so are
cells that call `nbdev_export` (a site build never rewrites the package). By default notebooks run with `IN_TEST=1`,
their small settings (about a minute for all of them on two CPU cores); `--full` runs their reader settings.
"""
from __future__ import annotations

import argparse, copy, html, json, os, re, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_DIRECTIVE = re.compile(r"^\s*#\|\s*(.*)$")


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


def title_of(nb, path: Path) -> str:
    "The notebook's first markdown heading, else its file name."
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m: return m.group(1).strip()
    return path.stem


def build(notebooks: list[Path], out: Path, execute: bool = True, full: bool = False, flags: set[str] = frozenset(),
          timeout: int = 900) -> list[dict]:
    "Render `notebooks` into `out` (one HTML page each plus index.html); returns one dict per page."
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    env_before = {k: os.environ.get(k) for k in ("IN_TEST", "MPLBACKEND")}
    pages = []
    try:
        os.environ.pop("MPLBACKEND", None)            # a non-interactive backend would hide the figures
        if not full: os.environ["IN_TEST"] = "1"
        else: os.environ.pop("IN_TEST", None)
        for path in notebooks:
            t0 = time.perf_counter()
            nb = prepare(nbformat.read(path, as_version=4), set(flags))
            if execute:
                NotebookClient(nb, timeout=timeout, kernel_name="python3",
                               resources={"metadata": {"path": str(path.parent)}}).execute()
            body, _ = exporter.from_notebook_node(nb)
            rel = path.relative_to(ROOT / "nbs") if path.is_relative_to(ROOT / "nbs") else Path(path.name)
            dst = out / rel.with_suffix(".html")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(body, encoding="utf-8")
            pages.append(dict(notebook=str(rel), page=str(dst.relative_to(out)), title=title_of(nb, path),
                              seconds=round(time.perf_counter() - t0, 1), figures=body.count("data:image/png")))
            print(f"{rel}: {pages[-1]['seconds']} s, {pages[-1]['figures']} figures", flush=True)
    finally:
        for k, v in env_before.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    rows = "\n".join(f'<li><a href="{html.escape(p["page"])}">{html.escape(p["title"])}</a> '
                     f'<small>({html.escape(p["notebook"])})</small></li>' for p in pages)
    (out / "index.html").write_text(f"<!doctype html><meta charset='utf-8'><title>disentbook</title>"
                                    f"<h1>disentbook notebooks</h1><ul>{rows}</ul>", encoding="utf-8")
    (out / "pages.json").write_text(json.dumps(pages, indent=1), encoding="utf-8")
    return pages


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("notebooks", nargs="*", help="notebooks to render (default: every notebook in nbs/)")
    p.add_argument("--out", default="_site", help="output folder")
    p.add_argument("--no-execute", action="store_true", help="render without executing")
    p.add_argument("--full", action="store_true", help="execute with the notebooks' full settings (no IN_TEST)")
    p.add_argument("--flags", default="", help="also run cells with these flags, e.g. 'slow'")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    a = p.parse_args(argv)
    nbs = [Path(n).resolve() for n in a.notebooks] or sorted((ROOT / "nbs").rglob("*.ipynb"))
    nbs = [n for n in nbs if ".ipynb_checkpoints" not in n.parts]
    missing = [str(n) for n in nbs if not n.is_file()]
    if missing: print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr); return 2
    build(nbs, Path(a.out), execute=not a.no_execute, full=a.full, flags=set(a.flags.split()), timeout=a.timeout)
    print(f"site written to {a.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
