"""The README's Python example runs as printed (with fewer steps and evaluation points, so the test stays fast)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example(monkeypatch, tmp_path):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    example = next(b for b in blocks if "make_objective" in b and "evaluate(" in b)
    small = example.replace("steps=2000", "steps=3").replace("num_points=2000", "num_points=300") \
                   .replace("num_test=1000", "num_test=150")
    assert small != example, "the README example changed: update the substitutions of this test"
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path))
    ns = {}
    exec(compile(small, "README.md", "exec"), ns)
    assert {"data", "model", "beta_vae"} <= set(ns)
