"""`disentbook claims` (repro.summary): every claim of the committed reports in one table, the README's section kept in
step with the reports, and the bad inputs as one-line errors."""
import json, shutil
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


def test_readme_section_is_the_committed_reports_table(tmp_path, capsys):
    "The README shows what `disentbook claims --readme` writes from reports/ (regenerate after a report changes)."
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    assert main(["claims", "--reports", str(ROOT / "reports"), "--readme", str(readme)]) == 0
    fresh = readme.read_text().replace(f"{(ROOT / 'reports').as_posix()}/", "reports/")
    assert fresh == (ROOT / "README.md").read_text(), \
        "README's claims section is stale: run `python3 -m disentbook claims --readme README.md` and commit it"
    assert main(["claims", "--reports", str(ROOT / "reports")]) == 0
    out = capsys.readouterr().out
    assert "| claim | source | quick |" in out and "claims (quick:" in out


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
