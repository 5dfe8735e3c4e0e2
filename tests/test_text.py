"""Text a user reads speaks of the package and its user: no issue numbers and no absolute paths of a machine in the
README, the design notes, the reports, the benchmarks' README, the model cards, the notebooks' prose and the package's
docstrings and messages (data files are named relative to the data directory)."""
import ast, json, re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")
ABSOLUTE = re.compile(r"(?<![\w$~.}])/(?:work|root|home|Users|tmp|mnt|opt|var|srv)/[\w.-]")


def texts():
    "(where, text) of every committed text a user reads."
    for f in ["README.md", "DESIGN.md", "benchmarks/README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "reports").rglob("*.md"))]:
        yield f, (ROOT / f).read_text()
    for f in sorted((ROOT / "reports").rglob("metrics.json")):
        yield str(f.relative_to(ROOT)), f.read_text()
    for f in sorted((ROOT / "disentbook" / "assets" / "pretrained").glob("*.json")):
        yield str(f.relative_to(ROOT)), f.read_text()
    for f in sorted((ROOT / "nbs").rglob("*.ipynb")):
        nb = json.loads(f.read_text())
        yield str(f.relative_to(ROOT)), "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for f in sorted((ROOT / "disentbook").rglob("*.py")):
        if f.name == "_modidx.py": continue
        strings = [n.value for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        yield str(f.relative_to(ROOT)), "\n".join(strings)


@pytest.mark.parametrize("pattern,what", [(ISSUE, "an issue number"), (ABSOLUTE, "an absolute path")])
def test_no_issue_numbers_or_machine_paths_in_text_a_user_reads(pattern, what):
    bad = [f"{where}: ...{text[max(0, m.start() - 50):m.end() + 30]!r}..." for where, text in texts()
           for m in pattern.finditer(text)]
    assert not bad, f"{what} in text a user reads:\n" + "\n".join(bad[:20])


def test_the_scan_finds_what_it_looks_for():
    assert ISSUE.search("as issue 22 says") and ISSUE.search("Issues 15 and 22") and not ISSUE.search("an issue with 3 seeds")
    assert ABSOLUTE.search("file at /work/main/data/x.npz") and ABSOLUTE.search("(/root/.cache/y)")
    assert not ABSOLUTE.search("mpi3d/mpi3d_real.npz in the data directory") and not ABSOLUTE.search("$DISENTBOOK_DATA/tmp/x")
