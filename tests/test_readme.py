"""Every command and code block of the README runs as printed, in a fresh working directory.

Only the cost changes: `--steps N` becomes `--steps 2` (and a `train` without `--steps` gets `--steps 2`), `--scale
quick` becomes `--scale smoke` (into the folder the README names), the Python examples train 3 steps and score fewer points. `disentbook` commands run
through the CLI's main function in-process. Commands that install software (`pip install`, `apt-get`), start the test
suite or JupyterLab, or need a GPU are not run here; each is checked for what it names (the extra, the packages `.ci/run`
installs, the paths) and is run elsewhere: the wheel install by tests/test_packaging.py, the site by tests/test_site.py.
"""
import os
import re
import shlex
from pathlib import Path

import pytest
import torch

from disentbook.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CLAIMS_PAGE = (ROOT / "docs" / "claims.md").read_text()
BASH = re.findall(r"```bash\n(.*?)```", README, re.S)
PYTHON = re.findall(r"```python\n(.*?)```", README, re.S)
INLINE = [c for c in re.findall(r"`(python3 -m disentbook [^`]+)`", README)
          if not re.search(r"[A-Z]{3,}|\||\[", c)]                      # placeholders (NAME, KEY=VALUE, a|b, [..]) are templates


def commands() -> list[list[str]]:
    "Each command of the README's bash blocks (comments dropped, `a && b` split), in order, as argv lists."
    out = []
    for block in BASH:
        for line in block.splitlines():
            argv = shlex.split(line, comments=True)
            while argv:
                cut = argv.index("&&") if "&&" in argv else len(argv)
                out.append(argv[:cut]); argv = argv[cut + 1:]
    return out


def cheap(argv: list[str]) -> list[str]:
    "The same disentbook command with fewer steps / the smoke scale."
    a = list(argv)
    for i, v in enumerate(a[:-1]):
        if v == "--steps": a[i + 1] = "2"
        if v == "--scale" and a[i + 1] == "quick":
            a[i + 1] = "smoke"
            if "--out" not in a: a += ["--out", f"results/{a[1]}-quick"]       # the folder the README names
    if a[0] == "train" and "--steps" not in a: a += ["--steps", "2"]
    return a


def not_run(argv: list[str]) -> str | None:
    "Why a README command is not run here (after checking what it names), or None when it runs."
    cmd = " ".join(argv)
    if argv[:4] == ["python3", "-m", "pip", "install"]:
        if "-e" in argv or ".[dev]" in argv:
            assert "dev" in (ROOT / "settings.ini").read_text() or "dev" in (ROOT / "pyproject.toml").read_text()
        assert (ROOT / "pyproject.toml").is_file()
        return "installs software"
    if argv[:2] == ["sudo", "apt-get"]:
        ci = (ROOT / ".ci" / "run").read_text()
        for pkg in (a for a in argv[2:] if not a.startswith("-") and a not in ("update", "install")):
            assert pkg in ci, f"{pkg} is not what .ci/run installs"
        return "installs system packages"
    if argv[:3] == ["python3", "-m", "pytest"]:
        assert all((ROOT / a).exists() for a in argv[3:]), cmd
        return "the test suite itself"
    if argv[:3] == ["python3", "-m", "jupyter"]:
        assert (ROOT / argv[-1]).is_dir(); return "interactive"
    if argv[:2] == ["python3", "tools/build_site.py"]:
        assert (ROOT / argv[1]).is_file(); return "tests/test_site.py builds the site"
    if len(argv) > 1 and argv[0] == "python3" and argv[1].startswith("benchmarks/"):
        assert (ROOT / argv[1]).is_file(); return "a benchmark (minutes; benchmarks/README.md has its results)"
    if "--device" in argv and argv[argv.index("--device") + 1].startswith("cuda") and not torch.cuda.is_available():
        return "needs CUDA"
    assert argv[:3] == ["python3", "-m", "disentbook"], f"a README command this test does not know how to run: {cmd}"
    return None


@pytest.fixture
def fresh_dir(tmp_path, monkeypatch):
    """A working directory of a new user of the repository: its notebooks at nbs/ and committed reports at reports/
    (what `disentbook claims` reads), a copy of docs/claims.md (what `claims --readme docs/claims.md` rewrites); offline,
    no data files."""
    (tmp_path / "nbs").symlink_to(ROOT / "nbs")
    (tmp_path / "reports").symlink_to(ROOT / "reports")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "claims.md").write_text(CLAIMS_PAGE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DISENTBOOK_OFFLINE", "1")
    return tmp_path


def run(capsys, argv):
    try: rc = main(argv)
    except SystemExit as e: rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_readme_has_the_commands_this_test_runs():
    cmds = [" ".join(c) for c in commands()]
    assert any("train --method contrastive_w2 --dataset grassy --out runs/w2" in c for c in cmds)
    assert any("reproduce vae --scale quick --resume" in c for c in cmds)
    assert any("reproduce vae --out results/vae-quick --rejudge" in c for c in cmds)
    assert any(c.startswith("python3 -m disentbook pretrained") for c in cmds)
    assert "python3 -m disentbook student-edition nbs/exercises/ student/" in INLINE and "python3 -m disentbook data list" in INLINE
    assert "python3 -m disentbook claims --readme docs/claims.md" in INLINE
    assert len(PYTHON) >= 3


def test_readme_is_short_and_in_a_newcomers_order():
    "About 16 KB, its sections in the order a newcomer needs them; the long-run operations and the claims on their own pages."
    assert len(README.encode()) <= 16_500, len(README.encode())
    heads = re.findall(r"^## (.+)$", README, re.M)
    order = ["Install", "Quick start", "The notebooks and the offline site", "In class", "Train, evaluate, reproduce", "GPU", "Data", "Tests"]
    assert [h for h in heads if h in order] == order, heads
    for page in ("docs/long-runs.md", "docs/claims.md", "docs/verdicts.md"):
        assert f"]({page})" in README and (ROOT / page).is_file(), page
    assert re.search(r"!\[[^]]+\]\(([^)]+\.png)\)", README) and (ROOT / re.search(r"!\[[^]]+\]\(([^)]+\.png)\)", README)[1]).is_file()


def test_every_readme_command_runs(fresh_dir, capsys):
    ran, skipped = [], []
    for argv in commands():
        why = not_run(argv)
        if why: skipped.append((" ".join(argv), why)); continue
        a = cheap(argv[3:])
        rc, out, err = run(capsys, a)
        assert rc == 0, f"`{' '.join(argv)}` (run as {a}) failed: {err[-2000:]}"
        ran.append(" ".join(argv))
        if a[:2] == ["reproduce", "vae"] and "--resume" not in a and "--rejudge" not in a:
            # the quick start ends with three plain lines: what trained, what it learned and did not (its numbers), what next
            last = out.strip().splitlines()[-3:]
            assert [l.split(":")[0] for l in last] == ["Trained", "Learned", "Next"], last
            assert "reconstruct" in last[1] and "MIG" in last[1] and re.search(r"\d\.\d{3}", last[1]), last[1]
            assert "results/vae-quick/report.md" in last[2] and "pretrained" in last[2], last[2]
            # the quick start run a second time, as written: refused in one line that says what to do (the README's next block)
            rc, _, err = run(capsys, a)
            assert rc == 2 and "--resume" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1, err
    for cmd in INLINE:
        rc, out, err = run(capsys, cheap(shlex.split(cmd)[3:]))
        assert rc == 0, f"`{cmd}` failed: {err[-2000:]}"
        ran.append(cmd)
    assert (fresh_dir / "runs" / "w2" / "metrics.json").is_file() and (fresh_dir / "student").is_dir()
    assert (fresh_dir / "docs" / "claims.md").read_text() == CLAIMS_PAGE         # `claims --readme docs/claims.md`: up to date
    report = (fresh_dir / "results" / "vae-quick" / "report.md").read_text()
    assert "\n## How the runs were made\n\nRe-judged " in report                 # the README's --rejudge ran last
    for png in sorted((fresh_dir / "results" / "vae-quick").rglob("*.png")):     # report.md links every figure written
        assert f"`{png.relative_to(fresh_dir / 'results' / 'vae-quick')}`" in report, png
    assert len(ran) >= 10, (ran, skipped)


def test_readme_python_blocks(fresh_dir):
    "The Python blocks in order, in one namespace (the metrics block uses the first block's model and data)."
    subs = {"steps=2000": "steps=3", "num_points=2000": "num_points=300", "num_test=1000": "num_test=150",
            "evaluate(model, data, seed=0)": "evaluate(model, data, seed=0, num_points=300, num_test=150, score_kwargs="
                                              "dict(batch_size=8, num_train=40, num_eval=20, num_variance_estimate=300))"}
    ns = {}
    for block in PYTHON:
        small = block
        for k, v in subs.items(): small = small.replace(k, v)
        exec(compile(small, "README.md", "exec"), ns)
    assert {"data", "model", "beta_vae", "table"} <= set(ns)
    assert set(ns["table"]["metric"]) >= {"mig", "sap", "dci", "modularity", "irs", "factor_vae", "beta_vae"}
