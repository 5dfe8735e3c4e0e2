"""The notebooks are the source and the first test suite: run them all with nbdev_test, and check that
the exported library and the cleaned notebooks are exactly what is committed."""
import filecmp, shutil, subprocess
from pathlib import Path

from conftest import script


def test_notebooks_run(root, clean_env):
    """Every notebook executes under nbdev_test (IN_TEST set, `slow` and `cuda` cells skipped). nbdev_test runs one
    notebook per CPU core; one torch thread each keeps them from oversubscribing the cores (which slows torch 10x)."""
    env = dict(clean_env, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([script("nbdev_test"), "--timing"], cwd=root, env=env, capture_output=True, text=True)
    print(r.stdout[-5000:], r.stderr[-5000:])
    assert r.returncode == 0, f"nbdev_test failed:\n{r.stderr[-5000:]}"


def _copy_project(root: Path, dst: Path):
    for d in ("nbs", "disentbook"): shutil.copytree(root / d, dst / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("settings.ini", "pyproject.toml", "setup.py"): shutil.copy(root / f, dst / f)


def _diff_tree(a: Path, b: Path, pattern: str):
    fa = sorted(p.relative_to(a) for p in a.rglob(pattern) if "__pycache__" not in p.parts)
    fb = sorted(p.relative_to(b) for p in b.rglob(pattern) if "__pycache__" not in p.parts)
    assert fa == fb, f"files differ: only committed {set(fa) - set(fb)}, only exported {set(fb) - set(fa)}"
    return [str(f) for f in fa if not filecmp.cmp(a / f, b / f, shallow=False)]


def _run_on_copy(root: Path, dst: Path, tool: str, env: dict):
    "Run an nbdev tool on a copy of the project, so the checkout itself is never modified."
    _copy_project(root, dst)
    r = subprocess.run([script(tool)], cwd=dst, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_library_in_sync_with_notebooks(root, tmp_path, clean_env):
    "nbdev_export on a copy of the project leaves disentbook/ and pyproject.toml unchanged."
    _run_on_copy(root, tmp_path, "nbdev_export", clean_env)
    changed = _diff_tree(root / "disentbook", tmp_path / "disentbook", "*.py")
    assert not changed, f"disentbook/ is out of sync with nbs/ (run nbdev_export and commit): {changed}"
    assert filecmp.cmp(root / "pyproject.toml", tmp_path / "pyproject.toml", shallow=False), "pyproject.toml changed"


def test_notebooks_clean(root, tmp_path, clean_env):
    "Committed notebooks are already nbdev_clean'ed and carry no widget state."
    _run_on_copy(root, tmp_path, "nbdev_clean", clean_env)
    changed = _diff_tree(root / "nbs", tmp_path / "nbs", "*.ipynb")
    assert not changed, f"notebooks not cleaned (run nbdev_clean): {changed}"
    for nb in (root / "nbs").rglob("*.ipynb"):
        assert "application/vnd.jupyter.widget-state+json" not in nb.read_text(), f"{nb} carries widget state"


def test_run_all_never_rewrites_the_package(root):
    """No notebook calls nbdev_export: a reader's Run All (or a site build) must not rewrite disentbook/ from a notebook
    they edited. Developers export with the `nbdev_export` command."""
    calls = [str(nb.relative_to(root)) for nb in (root / "nbs").rglob("*.ipynb")
             if any("nbdev_export" in "".join(c.get("source", "")) and c.get("cell_type") == "code"
                    for c in __import__("json").loads(nb.read_text())["cells"])]
    assert not calls, f"notebooks that export when run: {calls}"


def test_every_notebook_names_its_kernel(root, tmp_path, clean_env):
    """Every notebook carries a kernelspec (JupyterLab opens it without asking for a kernel), and nbdev_clean keeps it:
    a notebook that loses it on cleaning would lose it on the next commit."""
    import json
    missing = [str(nb.relative_to(root)) for nb in sorted((root / "nbs").rglob("*.ipynb"))
               if json.loads(nb.read_text()).get("metadata", {}).get("kernelspec", {}).get("name") != "python3"]
    assert not missing, f"notebooks without a python3 kernelspec (open them in JupyterLab and pick Python 3): {missing}"
    _run_on_copy(root, tmp_path, "nbdev_clean", clean_env)
    lost = [str(nb.relative_to(tmp_path)) for nb in sorted((tmp_path / "nbs").rglob("*.ipynb"))
            if "kernelspec" not in json.loads(nb.read_text()).get("metadata", {})]
    assert not lost, f"nbdev_clean dropped the kernelspec of {lost}"
