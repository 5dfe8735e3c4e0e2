"""Text a user reads speaks of the package and its user: no issue numbers, no words of how the package was made (slots,
sessions, tasks, other developers), no absolute paths of a machine. It covers the README, the design notes, docs/, the
reports, the benchmarks' and tools' README and docstrings, the model cards, the notebooks (prose, code comments and
strings, outputs) and the package's docstrings and messages (what `--help`, `--plan` and every command print); and no
committed text file carries a machine's path (data files are named relative to the data directory)."""
import ast, json, re, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")
ABSOLUTE = re.compile(r"(?<![\w$~.}])/(?:work|root|home|Users|tmp|mnt|opt|var|srv)/[\w.-]")
PROCESS = re.compile(r"\bGPU slots?\b|\b(?<!condition )slot(?:s|'s)?\b(?! of the one-hot)|\bsessions?\b|\bthis task\b|"
                     r"\b(?:was|were|is|be|been|not|a) lent\b|\bno GPU lent\b|\bother developers?\b|\bdevelopers' jobs\b", re.I)
MARKDOWN = ["README.md", "DESIGN.md", "benchmarks/README.md"]



def _strings(src: str) -> str:
    "The string constants of Python source (docstrings, messages, what it prints)."
    try: tree = ast.parse(src)
    except SyntaxError: return ""
    return "\n".join(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _cell_code(src: str) -> str:
    return re.sub(r"^\s*[%!].*$", "", src, flags=re.M)                   # magics and shell lines are not Python


def texts(code_too: bool = True):
    """(where, text) of every committed text a user reads; with `code_too`, also the notebooks' code comments and
    strings (a student reads them, but a check cell may name a path on purpose: `data_dir("/tmp/x")`)."""
    pages = [*MARKDOWN, *sorted(str(p.relative_to(ROOT)) for d in ("docs", "reports", "tools") for p in (ROOT / d).rglob("*.md"))]
    for f in pages:
        yield f, (ROOT / f).read_text()
    for f in sorted((ROOT / "reports").rglob("metrics.json")):
        yield str(f.relative_to(ROOT)), f.read_text()
    for f in sorted((ROOT / "disentbook" / "assets" / "pretrained").glob("*.json")):
        yield str(f.relative_to(ROOT)), f.read_text()
    for f in sorted((ROOT / "nbs").rglob("*.ipynb")):
        where, nb = str(f.relative_to(ROOT)), json.loads(f.read_text())
        for c in nb["cells"]:
            src = "".join(c["source"])
            if c["cell_type"] == "markdown": yield where, src; continue
            for o in c.get("outputs", []):
                yield f"{where} (output)", "".join(o.get("text", [])) + "".join((o.get("data") or {}).get("text/plain", []))
            if code_too and c["cell_type"] == "code":
                yield f"{where} (code)", _strings(_cell_code(src)) + "\n" + "\n".join(re.findall(r"#[^\n]*", src))
    for d in ("disentbook", "benchmarks", "tools"):
        for f in sorted((ROOT / d).rglob("*.py")):
            if f.name == "_modidx.py": continue
            yield str(f.relative_to(ROOT)), _strings(f.read_text())


def _scan(pattern, code_too=True):
    return [f"{where}: ...{text[max(0, m.start() - 50):m.end() + 30]!r}..." for where, text in texts(code_too)
            for m in pattern.finditer(text)]


@pytest.mark.parametrize("pattern,what", [(ISSUE, "an issue number"), (PROCESS, "a word of how the package was made")])
def test_no_issue_numbers_or_process_words_in_text_a_user_reads(pattern, what):
    bad = _scan(pattern)
    assert not bad, f"{what} in text a user reads:\n" + "\n".join(bad[:30])


def test_no_machine_paths_in_text_a_user_reads():
    bad = _scan(ABSOLUTE, code_too=False)
    assert not bad, "an absolute path in text a user reads:\n" + "\n".join(bad[:30])


def test_no_committed_file_carries_a_machine_path():
    "Every tracked text file but the tests and the notebooks' check cells (whose literals may be paths on purpose)."
    try: files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError): pytest.skip("not a git checkout: no list of committed files")
    bad = []
    for f in filter(None, files):
        if f.startswith("tests/") or f.endswith(".ipynb") or not (ROOT / f).is_file(): continue
        data = (ROOT / f).read_bytes()
        if b"\0" in data[:4096]: continue                                    # binary
        text = data.decode("utf-8", "replace")
        if f.endswith(".py"): text = _strings(text) + "\n" + "\n".join(re.findall(r"#[^\n]*", text))
        bad += [f"{f}: ...{text[max(0, m.start() - 40):m.end() + 30]!r}..." for m in ABSOLUTE.finditer(text)]
    assert not bad, "a machine's path in a committed file:\n" + "\n".join(bad[:30])


def test_the_scan_finds_what_it_looks_for():
    assert ISSUE.search("as issue 22 says") and ISSUE.search("Issues 15 and 22") and not ISSUE.search("an issue with 3 seeds")
    assert ABSOLUTE.search("file at /work/main/data/x.npz") and ABSOLUTE.search("(/root/.cache/y)")
    assert not ABSOLUTE.search("mpi3d/mpi3d_real.npz in the data directory") and not ABSOLUTE.search("$DISENTBOOK_DATA/tmp/x")
    for said in ("the next GPU slot", "a 30-minute slot", "a slot's stage limit", "before a session stops", "earlier sessions",
                 "No GPU was lent to this task", "no GPU lent to this task", "other developers' jobs", "shared with three other developers"):
        assert PROCESS.search(said), said
    for fine in ("the one-hot condition slots for VFAE / CVIB", "the slots of the one-hot nuisance condition", "a GPU rented by the slice",
                 "one job's clone to the next", "the developer tools"):
        assert not PROCESS.search(fine), fine
    assert any("docs/" in w for w, _ in texts()) and any(w.startswith("tools/") for w, _ in texts()) \
        and any(w.endswith("(code)") for w, _ in texts()), "the scan reaches docs/, tools/ and the notebooks' code"


def test_the_method_page_is_what_the_judge_says():
    "docs/verdicts.md, which every report links, is `repro.report.method_page()`: the judge's rule word for word."
    from disentbook.repro.report import METHOD_PAGE, READING, method_page
    assert (ROOT / METHOD_PAGE).read_text() == method_page(), \
        "docs/verdicts.md is stale: run `python3 -c \"from disentbook.repro.report import write_method_page; write_method_page()\"`"
    assert len(READING) <= 5, "the reading guide of a report: five lines at most"
    for r in sorted((ROOT / "reports").glob("*/report.md")):
        text = r.read_text()
        link = re.search(r"\]\(([^)]*verdicts\.md)\)", text)
        assert link and (r.parent / link[1]).resolve() == (ROOT / METHOD_PAGE).resolve(), f"{r}: no working link to {METHOD_PAGE}"
        assert text.index("**How to read this report**") < text.index("| model |"), f"{r}: the reading guide, then the tables"
