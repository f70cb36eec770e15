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

# Rank of each layer, bottom first: a module may import its own rank or lower. Features share a
# rank and may use each other as long as no cycle forms (checked below).
LAYERS = [
    ("leaves", ["memvault.errors", "memvault.config", "memvault.dates", "memvault.tokens", "memvault.gitstore",
                "memvault.credentials", "memvault.jsonline", "memvault.arguments", "memvault.storage",
                "memvault.storage.layout"]),
    ("formats", ["memvault.facts", "memvault.pages", "memvault.dreamlog", "memvault.tombstones"]),
    ("storage", ["memvault.storage.*"]),
    ("features", ["memvault.citations", "memvault.timeline", "memvault.context", "memvault.sync",
                  "memvault.sync_checks",
                  "memvault.health", "memvault.union_merge", "memvault.purge", "memvault.purge_filter",
                  "memvault.index", "memvault.index.*",
                  "memvault.dream", "memvault.dream.*"]),
    ("facade", ["memvault.vault", "memvault"]),
    ("front ends", ["memvault.__main__", "memvault.cli", "memvault.cli.*", "memvault.mcp", "memvault.mcp.*"]),
]


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


def _rank(module: str) -> int:
    best = None
    for rank, (_layer, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            exact = pattern == module
            nested = pattern.endswith(".*") and module.startswith(pattern[:-1])
            if exact or (nested and best is None):
                best = rank
            if exact:
                return rank
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md"
    return best


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
    upward = [f"{m} ({LAYERS[_rank(m)][0]}) imports {t} ({LAYERS[_rank(t)][0]})"
              for m, imports in GRAPH.items() for t, _ in imports if _rank(t) > _rank(m)]
    assert upward == []


def test_no_module_borrows_another_modules_private_names():
    borrowed = [f"{m} imports {name} from {t}" for m, imports in GRAPH.items() for t, name in imports
                if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert borrowed == []


def test_the_library_never_writes_to_the_terminal():
    """Only front ends print; the library reports through callbacks (union_merge.main is the
    program git runs as a merge driver, a front end of its own)."""
    writers = []
    for name, path in MODULES.items():
        if _rank(name) == len(LAYERS) - 1:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            calls_print = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
            std_stream = isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") \
                and getattr(node.value, "id", None) == "sys"
            if calls_print or std_stream:
                if not _inside_union_merge_main(name, path, node):
                    writers.append(f"{name}:{node.lineno}")
    assert writers == []


def _inside_union_merge_main(name: str, path: Path, target: ast.AST) -> bool:
    if name != "memvault.union_merge":
        return False
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            return node.lineno <= target.lineno <= (node.end_lineno or node.lineno)
    return False


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
