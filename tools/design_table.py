"""Write DESIGN.md's table of modules (one line per module: layer, module, the notebook that exports it, the first sentence
of its docstring) from the notebooks and the package, between the markers `<!-- modules:start -->` and
`<!-- modules:end -->`. `--check` only says whether DESIGN.md is up to date (exit 1 if not).

    python3 tools/design_table.py            # rewrite the table
    python3 tools/design_table.py --check    # exit 1 when the table differs from what the code says
"""
import argparse, ast, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "data", "nets", "objectives", "training", "eval", "repro", "classroom", "cli")
LAYER_OF = {"checking": "core", "jobs": "cli", "cli": "cli", "campaign": "cli", "__main__": "cli", "__init__": "cli"}
START, END = "<!-- modules:start -->", "<!-- modules:end -->"


def first_sentence(doc: str, limit: int = 150) -> str:
    "The docstring's first sentence (up to a full stop or colon followed by a capital or a backquote), at most `limit` characters."
    text = " ".join(doc.split())
    m = re.search(r"[.:] (?=[A-Z`*(])", text)
    s = (text[:m.start()] if m else text).rstrip(".")
    return s if len(s) <= limit else s[:limit - 2].rsplit(" ", 1)[0] + " …"


def table() -> str:
    rows = []
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        m = re.search(r"#\| default_exp ([\w.]+)", nb.read_text())
        if not m: continue
        mod = m.group(1)
        f = ROOT / "disentbook" / (mod.replace(".", "/") + ".py")
        doc = ast.get_docstring(ast.parse(f.read_text())) or ""
        head = mod.split(".")[0]
        layer = LAYER_OF.get(head, head)
        rows.append((LAYERS.index(layer), nb.stem, layer, mod, first_sentence(doc).replace("|", "\\|")))
    lines = ["| layer | module | notebook | what it holds |", "|---|---|---|---|"]
    lines += [f"| {layer} | `{mod}` | `{stem}` | {what} |" for _, stem, layer, mod, what in sorted(rows)]
    return "\n".join(lines)


def main(argv=None) -> int:
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0]); a.add_argument("--check", action="store_true")
    args = a.parse_args(argv)
    path = ROOT / "DESIGN.md"
    text = path.read_text()
    if START not in text or END not in text:
        print(f"DESIGN.md has no {START} ... {END} markers"); return 2
    head, rest = text.split(START, 1)
    new = f"{head}{START}\n{table()}\n{END}{rest.split(END, 1)[1]}"
    if args.check:
        if new != text: print("DESIGN.md's table of modules is out of date: run python3 tools/design_table.py"); return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__": sys.exit(main())
