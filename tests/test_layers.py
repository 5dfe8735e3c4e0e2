"""The package's layers (DESIGN.md): a module imports only from its own layer or the layers below it, and no
import cycle exists anywhere. Walks every module's imports (module level and inside functions alike)."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "disentbook"
LAYERS = ("core", "data", "nets", "objectives", "train", "eval", "repro", "classroom", "cli")
LAYER_OF = {"core": "core", "checking": "core", "nets": "nets", "train": "train", "checkpoints": "train", "engine": "train", "capture": "train", "ensemble": "train", "cli": "cli", "jobs": "cli", "campaign": "cli", "__main__": "cli"}


def layer(mod: str) -> int:
    "Rank of a module name relative to the package ('data.dsprites' -> rank of 'data')."
    head = mod.split(".")[0]
    return LAYERS.index(LAYER_OF.get(head, head))


def modules() -> dict:
    out = {}
    for f in PKG.rglob("*.py"):
        if f.name == "_modidx.py": continue
        rel = f.relative_to(PKG).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = f
    return out


def imports(mods: dict) -> dict:
    "{module: {imported package module}} (relative and absolute imports of disentbook, resolved to modules)."
    edges = {}
    for name, f in mods.items():
        pkg_parts = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(f.read_text())):
            cands = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg_parts[: len(pkg_parts) - (node.level - 1)] if node.level > 1 else pkg_parts
                    mod = ".".join([p for p in base if p] + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "disentbook":
                    mod = node.module[len("disentbook."):] if "." in node.module else ""
                else: continue
                cands = [f"{mod}.{a.name}".lstrip(".") for a in node.names] + [mod]
            elif isinstance(node, ast.Import):
                cands = [a.name[len("disentbook."):] for a in node.names if a.name.startswith("disentbook.")]
            for c in cands:
                while c and c not in mods: c = c.rpartition(".")[0]
                if c and c != name and mods[c].name != "__init__.py": targets.add(c); break
        edges[name] = targets
    return edges


def test_layer_table_covers_every_module():
    for name, f in modules().items():
        if f.name == "__init__.py": continue
        layer(name)                                   # raises ValueError for a module outside the layer table


def test_no_upward_imports():
    mods = modules(); edges = imports(mods)
    bad = [f"{m} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]})" for m, ts in edges.items()
           if mods[m].name != "__init__.py" for t in ts if layer(t) > layer(m)]
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    edges = imports(modules()); state, stack, cycles = {}, [], []
    def visit(v):
        state[v] = 1; stack.append(v)
        for w in edges.get(v, ()):
            if state.get(w) == 1: cycles.append(stack[stack.index(w):] + [w])
            elif w not in state: visit(w)
        stack.pop(); state[v] = 2
    for v in edges:
        if v not in state: visit(v)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_walker_sees_a_violation(tmp_path, monkeypatch):
    "The walker itself: a fake package with an upward import and a cycle is caught."
    pkg = tmp_path / "disentbook"; (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text(""); (pkg / "data" / "__init__.py").write_text("")
    (pkg / "core.py").write_text("from .data.base import X\n")
    (pkg / "data" / "base.py").write_text("from ..core import Y\nX = 1\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    edges = imports(modules())
    assert edges["core"] == {"data.base"} and edges["data.base"] == {"core"}
    with pytest.raises(AssertionError, match="upward"): test_no_upward_imports()
    with pytest.raises(AssertionError, match="cycles"): test_no_import_cycles()


def test_no_module_below_the_cli_imports_the_package_root():
    "Registries fill themselves from their source modules (core.Registry), so nothing below the CLI imports `disentbook` itself."
    bad = []
    for name, f in modules().items():
        if name in ("cli", "__main__", "") or f.name == "__init__.py": continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "disentbook" for a in node.names): bad.append(f"{name}: import disentbook")
            if isinstance(node, ast.ImportFrom) and node.module == "disentbook" and not node.level:
                bad += [f"{name}: from disentbook import {a.name}" for a in node.names if not (PKG / a.name).exists()
                        and not (PKG / f"{a.name}.py").exists()]
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module is None and name.count(".") == 1:
                bad += [f"{name}: from .. import {a.name}" for a in node.names if not (PKG / f"{a.name}.py").exists()
                        and not (PKG / a.name).is_dir()]
    assert not bad, bad


def test_a_registry_imports_its_sources_on_first_lookup(tmp_path, monkeypatch):
    import sys
    from disentbook.core import InputError, Registry
    reg = Registry("thing", ("fake_things_module",))
    (tmp_path / "fake_things_module.py").write_text("import builtins\nbuiltins._REG.register('gadget')(object())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins; builtins._REG = reg
    try:
        assert "fake_things_module" not in sys.modules
        assert "gadget" in reg and "fake_things_module" in sys.modules and list(reg) == ["gadget"]
        with pytest.raises(InputError, match="unknown thing 'widget'; known: gadget"): reg["widget"]
    finally:
        del builtins._REG; sys.modules.pop("fake_things_module", None)
