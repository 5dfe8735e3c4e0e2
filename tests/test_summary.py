"""`disentbook claims` (repro.summary): every claim of the committed reports in one table, the README's section kept in
step with the reports, and the bad inputs as one-line errors."""
import json, re, shutil
from pathlib import Path

import pytest

from disentbook.cli import main
from disentbook.core import InputError
from disentbook.repro import summary as S

ROOT = Path(__file__).resolve().parents[1]


def _report(d: Path, paper: str, scale: str, claims: list):
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps(dict(paper=paper, scale=scale, device="cpu", claims=claims)))


def test_one_row_per_claim_one_column_per_scale(tmp_path):
    c = lambda v, p=None: dict(claim="A beats B", source="Table 1", ours=False, verdict=v, power=p, n=3)
    _report(tmp_path / "toy-quick", "toy", "quick", [c("inconclusive", 0.4), dict(c("holds"), claim="B | C", ours=True)])
    _report(tmp_path / "toy-gpu", "toy", "gpu", [c("fails", 0.9)])
    _report(tmp_path / "toy-smoke", "toy", "smoke", [c("not tested at this scale")])       # smoke judges nothing
    rows = S.claims_table(tmp_path)
    assert [(r["claim"], sorted(r["scales"])) for r in rows] == [("A beats B", ["gpu", "quick"]), ("B | C", ["quick"])]
    assert rows[0]["scales"]["gpu"] == dict(verdict="fails", power=0.9, n=3, report="toy-gpu", device="cpu")
    md = S.claims_markdown(rows)
    assert "| claim | source | quick | gpu |" in md
    assert "| A beats B | Table 1 | [inconclusive](reports/toy-quick/report.md) (power 0.40) | [**fails**](reports/toy-gpu/report.md) (power 0.90) |" in md
    assert "| B \\| C *(ours)* | Table 1 | [holds](reports/toy-quick/report.md) | — |" in md
    assert S.counts(rows, "quick") == {"inconclusive": 1, "holds": 1} and S.counts(rows, "paper") == {}


def test_claims_page_is_the_committed_reports_table(tmp_path, monkeypatch, capsys):
    "docs/claims.md shows what `disentbook claims --readme` writes from reports/ (regenerate after a report changes)."
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "claims.md", tmp_path / "docs" / "claims.md")
    (tmp_path / "reports").symlink_to(ROOT / "reports")
    monkeypatch.chdir(tmp_path)
    assert main(["claims", "--readme"]) == 0                                   # the default page: docs/claims.md
    assert (tmp_path / "docs" / "claims.md").read_text() == (ROOT / "docs" / "claims.md").read_text(), \
        "docs/claims.md is stale: run `python3 -m disentbook claims --readme docs/claims.md` and commit it"
    assert main(["claims"]) == 0
    out = capsys.readouterr().out
    assert "| claim | source | quick |" in out and "claims (quick:" in out


def test_links_are_relative_to_the_page(tmp_path, monkeypatch):
    "A page's links to the reports are relative to the page's own folder."
    _report(tmp_path / "r" / "toy-quick", "toy", "quick", [dict(claim="A beats B", verdict="holds")])
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "p.md").write_text("<!-- claims:start -->\n<!-- claims:end -->\n")
    monkeypatch.chdir(tmp_path)
    assert main(["claims", "--reports", "r", "--readme", "a/b/p.md"]) == 0
    assert "](../../r/toy-quick/report.md)" in (tmp_path / "a" / "b" / "p.md").read_text()


def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    assert main(["claims", "--reports", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "README.md").write_text("no markers here\n")
    _report(tmp_path / "r" / "x-quick", "x", "quick", [])
    assert main(["claims", "--reports", str(tmp_path / "r"), "--readme", str(tmp_path / "README.md")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "claims:start" in err
    (tmp_path / "r" / "x-quick" / "metrics.json").write_text("{bad")
    with pytest.raises(InputError, match="not readable JSON"): S.claims_table(tmp_path / "r")


def test_reports_index_is_generated_from_the_reports(tmp_path):
    """reports/README.md's table is what `disentbook claims --index reports/README.md` writes from the committed reports
    (one row per report, those kept as history too: scale, sensitivity, device, runs, training time, the headline claim's verdict, the counts), and
    the prose below it names no verdict: every verdict word comes from the generated part."""
    page = ROOT / "reports" / "README.md"
    copy = tmp_path / "README.md"
    copy.write_text(page.read_text())
    reports = [*(ROOT / "reports").glob("*/metrics.json"), *(ROOT / "reports").glob("*/history/*/metrics.json")]
    assert S.write_index(copy, ROOT / "reports") == len(reports)          # a report kept as history has its row too
    assert copy.read_text() == page.read_text(), \
        "reports/README.md is stale: run `python3 -m disentbook claims --index reports/README.md` and commit it"
    head, rest = page.read_text().split(S.INDEX_START)
    table, prose = rest.split(S.INDEX_END)
    assert table.count("\n| [") == len(reports)
    for word in ("holds", "fails", "inconclusive", "not tested", "learning not shown", "not checked", "passes its gate",
                 "did not learn", "undecided"):
        assert word not in prose.lower() and word not in head.lower(), f"reports/README.md prose says {word!r}: verdicts come from the index"


def test_index_command_rewrites_only_its_section(tmp_path, capsys):
    "`claims --index PAGE` rewrites PAGE's index section from --reports and leaves the rest; no markers: a one-line error."
    _report(tmp_path / "r" / "x-quick", "dipvae", "quick", [dict(claim="(1) A beats B", verdict="holds")])
    page = tmp_path / "r" / "README.md"
    page.write_text(f"# top\n\n{S.INDEX_START}\nstale\n{S.INDEX_END}\n\nprose\n")
    assert main(["claims", "--reports", str(tmp_path / "r"), "--index", str(page)]) == 0
    text = page.read_text()
    assert "stale" not in text and text.startswith("# top\n") and text.endswith("\n\nprose\n")
    assert "| [x-quick](x-quick/report.md) | dipvae | quick | — | cpu | 0 | — | (1): holds | 1 holds |" in text
    page.write_text("no markers")
    assert main(["claims", "--reports", str(tmp_path / "r"), "--index", str(page)]) == 2
    assert "index:start" in capsys.readouterr().err

def test_every_figure_a_committed_report_lists_exists():
    """Each path a committed report lists under "## Figures" is a file, its own or, for a report that evaluates another
    report's runs again (`trained_in`), that report's copy; such a report holds no duplicate of a training file."""
    from disentbook.repro.outdir import RUN_TRAINING
    reports = sorted((ROOT / "reports").glob("*/report.md"))
    assert len(reports) >= 10
    for r in reports:
        section = r.read_text().split("## Figures", 1)[-1].split("\n## ", 1)[0]
        for f in re.findall(r"^- `([^`]+)`", section, flags=re.M):
            assert (r.parent / f).is_file(), (r, f)
        trained_in = json.loads((r.parent / "metrics.json").read_text()).get("trained_in")
        if trained_in:
            assert (r.parent / trained_in / "report.md").is_file(), r
            assert not [p for name in RUN_TRAINING for p in r.parent.glob(f"runs/*/*/seed*/{name}")], r
