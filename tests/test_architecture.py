"""The shape of the code: layers that only point down, no import cycle, no borrowed private names.

The import graph is read from the source (every import statement, inside functions too), so a
lazy import cannot hide a cycle. docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memvault"

# Folders are the layers. Each folder of memvault/ (or module directly in it) and its layer; the
# layers in ORDER, bottom first: a module may import its own layer or a lower one. The feature
# packages share a layer and may use each other where no cycle forms between them (checked below).
LAYER_OF = {
    "errors.py": "base",          # the exception classes every layer raises
    "base/": "base",
    "formats/": "formats",
    "storage/": "storage",
    "index/": "features",
    "recall/": "features",
    "dream/": "features",
    "remote/": "features",
    "health/": "features",
    "importers/": "features",
    "hosts/": "features",
    "vault/": "facade",
    "__init__.py": "facade",
    "cli/": "front ends",
    "mcp/": "front ends",
    "__main__.py": "front ends",
}
ORDER = ["base", "formats", "storage", "features", "facade", "front ends"]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[tuple[str, str | None]]]:
    """module -> {(imported module, imported name or None)} for every import of a memvault module."""
    graph: dict[str, set[tuple[str, str | None]]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name].update((alias.name, None) for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                if source not in modules:
                    continue
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    graph[name].add((submodule, None) if submodule in modules else (source, alias.name))
    return graph


def _folder(module: str) -> str:
    """The entry of LAYER_OF a module belongs to: its folder under memvault/, or its own file."""
    parts = MODULES[module].relative_to(PACKAGE).parts
    return f"{parts[0]}/" if len(parts) > 1 else parts[0]


def _rank(module: str) -> int:
    folder = _folder(module)
    assert folder in LAYER_OF, f"{folder} belongs to no layer: add it to LAYER_OF and docs/architecture.md"
    return ORDER.index(LAYER_OF[folder])


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in edges:
        if v not in index:
            visit(v)
    return found


MODULES = _modules()
GRAPH = _imports(MODULES)


def test_no_import_cycle_anywhere():
    edges = {m: {target for target, _ in imports if target != m} for m, imports in GRAPH.items()}
    assert _cycles(edges) == []


def test_imports_only_point_down_the_layers():
    upward = [f"{m} ({ORDER[_rank(m)]}) imports {t} ({ORDER[_rank(t)]})"
              for m, imports in GRAPH.items() for t, _ in imports if _rank(t) > _rank(m)]
    assert upward == []


def test_no_module_borrows_another_modules_private_names():
    borrowed = [f"{m} imports {name} from {t}" for m, imports in GRAPH.items() for t, name in imports
                if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert borrowed == []


def test_no_import_cycle_between_packages():
    """Layers point down at package level too: index, recall, dream, remote and health may use
    each other one way only."""
    edges: dict[str, set[str]] = {}
    for m, imports in GRAPH.items():
        edges.setdefault(_folder(m), set()).update(_folder(t) for t, _ in imports if _folder(t) != _folder(m))
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, set())
    assert _cycles(edges) == []


def test_at_most_three_modules_sit_directly_in_memvault():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py", "errors.py"]


def test_no_module_is_too_long_to_read():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}


def test_the_library_never_writes_to_the_terminal():
    """Only front ends print; the library reports through callbacks. A program git runs (the
    union merge driver, the purge filter: `main` of a module run with `python -m`) is a front end
    of its own."""
    writers = []
    for name, path in MODULES.items():
        if ORDER[_rank(name)] == "front ends":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            calls_print = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
            std_stream = isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") \
                and getattr(node.value, "id", None) == "sys"
            if (calls_print or std_stream) and not _inside_a_program_s_main(tree, node):
                writers.append(f"{name}:{node.lineno}")
    assert writers == []


def _inside_a_program_s_main(tree: ast.Module, target: ast.AST) -> bool:
    runs_as_program = any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)
    return runs_as_program and any(
        isinstance(node, ast.FunctionDef) and node.name == "main"
        and node.lineno <= target.lineno <= (node.end_lineno or node.lineno) for node in tree.body)


def test_import_memvault_cli_loads_nothing_heavy():
    heavy = ("litellm", "fastembed", "onnxruntime", "tantivy", "numpy", "git", "yaml", "mcp", "detect_secrets")
    code = f"import sys, memvault.cli; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_the_linter_finds_nothing():
    """ruff, configured in pyproject.toml, is a test dependency: the test command lints too."""
    beside = Path(sys.executable).parent / "ruff"
    ruff = str(beside) if beside.exists() else shutil.which("ruff")
    assert ruff, "ruff is missing: pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_type_checker_finds_nothing(tmp_path):
    """mypy, configured in pyproject.toml ([tool.mypy]: memvault/), runs within the test command."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_function_is_too_complex_to_hold_in_mind():
    """Cyclomatic complexity at most 20 per function or method, as radon counts it."""
    from radon.complexity import cc_visit

    found = [f"{path.relative_to(ROOT)}:{block.lineno} {block.name} ({block.complexity})"
             for path in sorted((ROOT / "memvault").rglob("*.py"))
             for block in cc_visit(path.read_text(encoding="utf-8"))
             for block in [block, *getattr(block, "methods", [])]
             if block.complexity > 20]
    assert found == []


def test_tests_take_helpers_from_the_support_package_not_from_conftest():
    """tests/support/ holds what the tests share; conftest.py holds fixtures only."""
    tests = ROOT / "tests"
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in tests.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if (isinstance(node, ast.ImportFrom) and node.module == "conftest")
             or (isinstance(node, ast.Import) and any(alias.name == "conftest" for alias in node.names))]
    assert found == []
