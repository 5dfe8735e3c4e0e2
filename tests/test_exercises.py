"""Self-checking exercises: checkers accept the reference and reject typical mistakes with one clear line;
student editions strip solutions, run up to the first exercise and fail there cleanly."""
import json
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from disentbook.cli import main
from disentbook.checking import NOT_IMPLEMENTED, Case, CheckResult, ExerciseFailed, check_function
from disentbook.classroom.exercises import (STUB_LINE, NotebookNotFoundError, SolutionMarkerError, check_beta_elbo, check_gaussian_kl, check_reparameterize, elbo_cases, kl_cases, reparam_cases, student_edition)
from disentbook.nets import bernoulli_nll, reparameterize
from disentbook.objectives.vae import gaussian_kl
from disentbook.classroom.checks import ATTEMPTS, RESULTS


def stub(*args):
    raise NotImplementedError("exercise: write your solution here")


def same_inputs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype if isinstance(a[k], torch.Tensor) else a[k] == b[k]
        for k in a)


def assert_one_line(r: CheckResult):
    assert not r and "\n" not in r.message and "Traceback" not in r.message and len(r.message) < 300, r.message


# ---------------------------------------------------------------- the Gaussian KL

def test_kl_accepts_correct_solutions():
    assert check_gaussian_kl(gaussian_kl)
    r = check_gaussian_kl(lambda mu, lv: 0.5 * (mu * mu + torch.exp(lv) - lv - 1))
    assert r.passed and r.max_error is not None and r.max_error < 1e-3 and r.failing_input is None
    def via_variance(mu, logvar):
        var = torch.exp(logvar)
        return (mu.pow(2) + var - logvar - 1) / 2
    assert check_gaussian_kl(via_variance)
    # torch.distributions squares sigma = exp(logvar / 2), which underflows for logvar = -120 in float32
    d = torch.distributions
    r = check_gaussian_kl(lambda mu, lv: d.kl_divergence(d.Normal(mu, (0.5 * lv).exp()),
                                                           d.Normal(torch.zeros_like(mu), torch.ones_like(mu))))
    assert not r and "zero variance" in r.message and "numerically unstable" in r.message


@pytest.mark.parametrize("wrong, first_case", [
    (lambda mu, lv: 0.5 * (mu**2 + lv.exp() - lv), 0),                            # missing the -1
    (lambda mu, lv: 0.5 * (mu**2 + (lv / 2).exp() - lv / 2 - 1), 2),              # sigma instead of sigma^2
    (lambda mu, lv: mu**2 + lv.exp() - lv - 1, 1),                                # forgot the 0.5
    (lambda mu, lv: 0.5 * (mu**2 + lv.exp() - lv.exp().log() - 1), 5),            # log(exp(logvar)) underflows
])
def test_kl_rejects_typical_mistakes(wrong, first_case):
    r = check_gaussian_kl(wrong)
    assert_one_line(r)
    case = kl_cases()[first_case]
    assert case.label in r.message and r.message.startswith("gaussian_kl: ")
    assert same_inputs(r.failing_input, case.inputs) and r.hint and "logvar" in r.hint
    assert r.max_error is not None and r.max_error > 0


def test_kl_messages():
    assert check_gaussian_kl(lambda mu, lv: mu**2 + lv.exp() - lv - 1).message == (
        "gaussian_kl: wrong value for unit variance (logvar = 0) at index (0, 0): expected 0.5, got 1")
    assert "numerically unstable" in check_gaussian_kl(lambda mu, lv: 0.5 * (mu**2 + lv.exp() - lv.exp().log() - 1)).message
    assert "returned shape (1,), expected shape (1, 2)" in check_gaussian_kl(lambda mu, lv: gaussian_kl(mu, lv).sum(-1)).message
    assert "returned dtype float32, expected float64" in check_gaussian_kl(lambda mu, lv: gaussian_kl(mu, lv).float()).message
    assert "returned ndarray, expected a torch.Tensor" in check_gaussian_kl(lambda mu, lv: gaussian_kl(mu, lv).numpy()).message
    assert "no gradient reaches `logvar`" in check_gaussian_kl(
        lambda mu, lv: 0.5 * (mu**2 + lv.detach().exp() - lv.detach() - 1)).message


# ---------------------------------------------------------------- reparameterisation

def test_reparameterize_accepts_correct_solutions():
    assert check_reparameterize(lambda mu, lv, eps: mu + torch.exp(0.5 * lv) * eps)
    assert check_reparameterize(lambda mu, lv, eps: mu + lv.mul(0.5).exp().mul(eps))


def test_reparameterize_rejects_typical_mistakes():
    r = check_reparameterize(lambda mu, lv, eps: mu + lv.exp() * eps)             # variance instead of std
    assert_one_line(r)
    assert "a random batch" in r.message and same_inputs(r.failing_input, reparam_cases()[1].inputs)
    assert "exp(logvar / 2)" in r.hint
    r = check_reparameterize(lambda mu, lv, eps: reparameterize(mu, lv))          # new noise instead of eps
    assert_one_line(r); assert "wrong value" in r.message
    r = check_reparameterize(lambda mu, lv, eps: mu.detach() + torch.exp(0.5 * lv) * eps)
    assert_one_line(r); assert "no gradient reaches `mu`" in r.message
    r = check_reparameterize(lambda mu, lv, eps: (mu + torch.exp(0.5 * lv) * eps).detach())
    assert_one_line(r); assert "no gradient flows" in r.message


# ---------------------------------------------------------------- beta-ELBO

def elbo_ok(x, x_logits, mu, logvar, beta):
    rec = F.binary_cross_entropy_with_logits(x_logits, x, reduction="none").flatten(1).sum(1)
    return (rec + beta * (0.5 * (mu**2 + logvar.exp() - logvar - 1)).sum(1)).mean()


def test_beta_elbo_accepts_correct_solutions():
    assert check_beta_elbo(elbo_ok)
    assert check_beta_elbo(lambda x, xl, mu, lv, b: (bernoulli_nll(xl, x) + b * gaussian_kl(mu, lv).sum(1)).mean())


def test_beta_elbo_rejects_typical_mistakes():
    r = check_beta_elbo(lambda x, xl, mu, lv, b: (bernoulli_nll(xl, x) + b * gaussian_kl(mu, lv).sum(1)).sum())
    assert_one_line(r)  # summing over the batch: right for a batch of one, wrong for three
    assert "a batch of three, beta = 1" in r.message and same_inputs(r.failing_input, elbo_cases()[1].inputs)
    r = check_beta_elbo(lambda x, xl, mu, lv, b: (b * bernoulli_nll(xl, x) + gaussian_kl(mu, lv).sum(1)).mean())
    assert_one_line(r)  # beta on the reconstruction: right for beta = 1, wrong for beta = 4
    assert "beta = 4" in r.message and same_inputs(r.failing_input, elbo_cases()[2].inputs)
    r = check_beta_elbo(lambda x, xl, mu, lv, b: bernoulli_nll(xl, x) + b * gaussian_kl(mu, lv).sum(1))
    assert_one_line(r); assert "expected a scalar, shape ()" in r.message
    r = check_beta_elbo(lambda x, xl, mu, lv, b: elbo_ok(x, xl, mu, lv, b).item())
    assert_one_line(r); assert "returned float, expected a torch.Tensor" in r.message
    r = check_beta_elbo(lambda x, xl, mu, lv, b: F.binary_cross_entropy(torch.sigmoid(xl), x, reduction="sum") / len(x)
                        + b * gaussian_kl(mu, lv).sum(1).mean())
    assert not r and "large logits" in r.message, r.message  # sigmoid then log loses the large logits


# ---------------------------------------------------------------- results, stubs, purity

@pytest.mark.parametrize("checker", [check_gaussian_kl, check_reparameterize, check_beta_elbo])
def test_stub_gives_clean_failure(checker):
    r = checker(stub)
    assert_one_line(r)
    assert r.message.endswith(NOT_IMPLEMENTED) and r.hint and r.max_error is None
    with pytest.raises(ExerciseFailed) as e: r.raise_if_failed()
    assert isinstance(e.value, AssertionError) and e.value.result is r and NOT_IMPLEMENTED in str(e.value)
    assert e.value._render_traceback_()[0].endswith(NOT_IMPLEMENTED + "\x1b[0m")  # IPython shows this, no traceback
    assert "✗" in str(r) and "disentbook-check" in r._repr_html_()


@pytest.mark.parametrize("checker", [check_gaussian_kl, check_reparameterize, check_beta_elbo])
def test_any_exception_is_caught(checker):
    def broken(*args): return args[0] @ torch.ones(7, 7)
    r = checker(broken)
    assert_one_line(r)
    assert "your function raised RuntimeError" in r.message and r.failing_input is not None


def test_raise_if_failed_and_bool():
    ok = check_gaussian_kl(gaussian_kl)
    assert ok.raise_if_failed() is ok and bool(ok) and "✓" in str(ok) and "passed" in ok._repr_html_()
    with pytest.raises(AssertionError, match="wrong value"):
        check_gaussian_kl(lambda mu, lv: mu**2 + lv.exp() - lv - 1).raise_if_failed()


def test_checkers_are_pure():
    state = torch.get_rng_state()
    a, b = check_reparameterize(lambda m, l, e: m + l.exp() * e), check_reparameterize(lambda m, l, e: m + l.exp() * e)
    assert a.message == b.message and same_inputs(a.failing_input, b.failing_input)
    assert torch.equal(torch.get_rng_state(), state)
    def in_place(mu, lv): return mu.mul_(0).add_(gaussian_kl(mu, lv))
    r = check_gaussian_kl(in_place)
    assert "changed its input `mu` in place" in r.message


def test_check_function_generic():
    cases = [Case("zero", {"x": torch.zeros(2)}), {"x": torch.tensor([-1.0, 2.0])}]
    assert check_function(lambda x: x.abs(), torch.abs, cases, name="abs")
    r = check_function(lambda x: x, torch.abs, cases, name="abs", hint="negative numbers")
    assert r.message == "abs: wrong value for case 2 at index (0,): expected 1, got -1" and r.hint == "negative numbers"
    assert "expected a function" in check_function("x", torch.abs, cases).message


# ---------------------------------------------------------------- student editions

@pytest.fixture
def instructor_nb(root):
    return root / "nbs" / "exercises" / "01_vae_exercises.ipynb"


def test_student_edition_of_the_vae_exercises(instructor_nb, tmp_path):
    before = instructor_nb.read_bytes()
    dst = tmp_path / "students" / "01_vae_exercises.ipynb"
    info = student_edition(instructor_nb, dst)
    assert instructor_nb.read_bytes() == before
    nb = nbformat.read(dst, as_version=4)
    nbformat.validate(nb)
    text = "\n".join(c.source for c in nb.cells)
    assert info["solutions"] == 3 and text.count(STUB_LINE) == 3
    for solution in ("BEGIN SOLUTION", "END SOLUTION", "logvar.exp() - logvar - 1", "torch.exp(0.5 * logvar) * eps",
                     "binary_cross_entropy_with_logits(x_logits", "#| instructor", "Instructor notes"):
        assert solution not in text, solution
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "widgets" not in nb.metadata and all("widgets" not in c.metadata for c in nb.cells)
    assert not list(tmp_path.glob("students/*.part"))


@pytest.mark.parametrize("name", ["01_vae_exercises", "02_dipvae_exercises", "03_tcwae_exercises",
                                  "04_contrastive_exercises"])
def test_student_edition_runs_all_without_stopping(name, tmp_path):
    """Run All on a student edition (every solution a stub) never stops: each check records and shows its failure
    ("not implemented yet"), cells that use unsolved exercises skip, and no cell ends in a traceback."""
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    from disentbook.classroom import widgets
    RESULTS.clear(); ATTEMPTS.clear()
    dst = tmp_path / "student.ipynb"
    student_edition(Path(__file__).parents[1] / "nbs" / "exercises" / f"{name}.ipynb", dst)
    shell, checks = CaptureShell(), 0
    for cell in read_nb(dst).cells:
        if cell.cell_type != "code": continue
        outputs = shell.run(cell.source)
        assert shell.exc is None, f"{name}: the cell raised {shell.exc!r}:\n{cell.source}"
        assert not any(o["output_type"] == "error" for o in outputs), cell.source
        checks += cell.source.startswith("check(")
    assert checks >= 3 and RESULTS and not any(RESULTS.values())
    r = shell.run("_c = check(check_gaussian_kl, 'gaussian_kl_student') if 'check_gaussian_kl' in dir() else None; _c")
    if name == "01_vae_exercises":
        c = shell.user_ns["_c"]
        assert c.result.message == f"gaussian_kl: {NOT_IMPLEMENTED}" and ATTEMPTS["gaussian_kl_student"] == 2


def test_check_is_strict_only_when_asked(monkeypatch):
    "A check raises (as the instructor notebooks' tests need) only when strict, which defaults to nbdev_test's IN_TEST."
    from disentbook.classroom.checks import check
    wrong = lambda mu, lv: 0.5 * (mu**2 + lv.exp() - lv)
    monkeypatch.delenv("IN_TEST", raising=False)
    c = check(check_gaussian_kl, wrong)
    assert not c.result and "constant term is missing" in c.html() and "0.5 * (mu**2" not in c.html()
    monkeypatch.setenv("IN_TEST", "1")
    with pytest.raises(ExerciseFailed): check(check_gaussian_kl, wrong)


def _write(path, cells, **meta):
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.update(meta)
    nbformat.write(nb, path)
    return path


def test_student_edition_conventions(tmp_path):
    code = nbformat.v4.new_code_cell(
        "def f(x):\n    \"doc\"\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\ny = 2")
    code.outputs = [nbformat.v4.new_output("stream", text="hello")]
    code.execution_count = 3
    code.metadata["widgets"] = {"x": 1}
    inst_code = nbformat.v4.new_code_cell("#| instructor\nprint('answers')")
    inst_md = nbformat.v4.new_markdown_cell("<!-- instructor -->\nGrading notes")
    tagged = nbformat.v4.new_code_cell("secret = 1", metadata={"tags": ["instructor"]})
    keep = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION is only a heading here")
    src = _write(tmp_path / "inst.ipynb", [keep, code, inst_code, inst_md, tagged],
                 widgets={"application/vnd.jupyter.widget-state+json": {"state": {}}})
    info = student_edition(src, tmp_path / "out.ipynb")
    assert info == dict(dst=str(tmp_path / "out.ipynb"), solutions=1, instructor_cells_removed=3, cells=2)
    raw = (tmp_path / "out.ipynb").read_text()
    assert "widget-state" not in raw and "answers" not in raw and "Grading" not in raw and "secret" not in raw
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert nb.cells[0].source == keep.source
    assert nb.cells[1].source == f"def f(x):\n    \"doc\"\n    {STUB_LINE}\n\ny = 2"
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None and "widgets" not in nb.cells[1].metadata


@pytest.mark.parametrize("source, err", [
    ("### BEGIN SOLUTION\nx = 1", "cell 0, line 1: `### BEGIN SOLUTION` is never closed"),
    ("x = 1\n### END SOLUTION", "cell 0, line 2: `### END SOLUTION` without a `### BEGIN SOLUTION`"),
    ("### BEGIN SOLUTION\n  ### BEGIN SOLUTION\n### END SOLUTION", "line 2: `### BEGIN SOLUTION` inside the region"),
    ("x = 1", "has no solution region"),
])
def test_student_edition_refuses_bad_markers(tmp_path, source, err):
    src = _write(tmp_path / "inst.ipynb", [nbformat.v4.new_code_cell(source)])
    before = src.read_bytes()
    with pytest.raises(SolutionMarkerError, match=err.replace("(", r"\(").replace(")", r"\)")):
        student_edition(src, tmp_path / "out.ipynb")
    assert not (tmp_path / "out.ipynb").exists() and src.read_bytes() == before
    assert list(tmp_path.iterdir()) == [src]  # no partial file left behind


def test_student_edition_refuses_bad_paths(tmp_path, instructor_nb):
    with pytest.raises(NotebookNotFoundError, match="instructor notebook not found"):
        student_edition(tmp_path / "missing.ipynb", tmp_path / "out.ipynb")
    with pytest.raises(ValueError, match="would overwrite its source"):
        student_edition(instructor_nb, instructor_nb)
    (tmp_path / "junk.ipynb").write_text("not json")
    with pytest.raises(ValueError, match="not a readable Jupyter notebook"):
        student_edition(tmp_path / "junk.ipynb", tmp_path / "out.ipynb")


def test_cli_student_edition(capsys, tmp_path, instructor_nb):
    dst = tmp_path / "s.ipynb"
    assert main(["student-edition", str(instructor_nb), str(dst)]) == 0
    out = capsys.readouterr().out
    assert dst.exists() and "3 solution(s) replaced" in out and str(dst) in out
    assert main(["student-edition", str(tmp_path / "nope.ipynb"), str(tmp_path / "t.ipynb")]) == 2
    err = capsys.readouterr().err
    assert "disentbook: error: instructor notebook not found" in err and "nope.ipynb" in err
    src = _write(tmp_path / "bad.ipynb", [nbformat.v4.new_code_cell("### END SOLUTION")])
    assert main(["student-edition", str(src), str(tmp_path / "u.ipynb")]) == 2
    assert "without a `### BEGIN SOLUTION`" in capsys.readouterr().err


def test_cli_student_edition_of_a_folder(capsys, tmp_path):
    src = Path(__file__).parents[1] / "nbs" / "exercises"
    assert main(["student-edition", str(src), str(tmp_path / "student")]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "student").glob("*.ipynb"))
    assert written == sorted(p.name for p in src.glob("*.ipynb") if "### BEGIN SOLUTION" in p.read_text())
    assert out.count("student edition written to") == len(written) >= 4
