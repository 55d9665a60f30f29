"""The package's shape: data flows one way and no module imports itself back.

Reads lakecdc/ with ``ast`` (nothing is imported), builds the graph of which lakecdc module imports which, and
checks it. An import inside a function still ties two modules together (it only hides the tie until the function
runs), so the whole-package graph counts those too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lakecdc"
LAYERS = ("source", "transform", "sink", "runtime")


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(tree: ast.Module, *, module_level_only: bool):
    """Import statements: those run when the module is imported (top level, also inside try/if, but not
    ``if TYPE_CHECKING``), or with ``module_level_only=False`` every import in the file."""
    if not module_level_only:
        yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
        return
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try)) and not _is_type_checking_block(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                pending.extend(getattr(node, field, []) or [])
        elif isinstance(node, ast.ExceptHandler):
            pending.extend(node.body)


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The lakecdc modules an import statement in module ``name`` (file ``path``) loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base not in modules:
        return set()
    found = set()
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            found.add(submodule)
        elif not any(modules[base].parent.glob(f"{alias.name}.*")):  # a compiled extension is a module of its own
            found.add(base)
    return found


def import_graph(*, module_level_only: bool) -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets: set[str] = set()
        for node in _import_nodes(tree, module_level_only=module_level_only):
            targets |= _imported(name, path, node, modules)
        graph[name] = targets - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_imports():
    graph = import_graph(module_level_only=True)
    assert "lakecdc.source.connection" in graph["lakecdc.source.binlog"]
    assert "lakecdc.source.types" in graph["lakecdc.source.ddl"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_at_module_level():
    assert _cycle(import_graph(module_level_only=True)) is None


def test_no_import_cycle_counting_imports_inside_functions():
    assert _cycle(import_graph(module_level_only=False)) is None


def test_the_library_does_not_import_the_dagster_layer():
    for module, targets in import_graph(module_level_only=False).items():
        if module.split(".")[1:2] and module.split(".")[1] in LAYERS:
            dagster = sorted(t for t in targets if t == "lakecdc.dagster" or t.startswith("lakecdc.dagster."))
            assert not dagster, f"{module} imports {dagster}: the library must not depend on its Dagster wrapper"


def test_the_source_imports_at_module_level():
    """lakecdc.source has no imports inside functions (the compiled row decoder, optional, is imported in a
    module-level try) and imports no ``_private`` name from another file."""
    for path in sorted((PACKAGE / "source").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
                assert not inner, f"{path.name}: {node.name} imports inside the function (line {inner[0].lineno})"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lakecdc"):
                private = [a.name for a in node.names
                           if a.name.startswith("_") and a.name not in ("_rowsdecoder", "_textrows")]
                assert not private, f"{path.name} line {node.lineno} imports private names {private}"


def test_lazy_package_exports_do_not_share_a_submodule_name():
    """A package that exports names lazily (module ``__getattr__``) must not export a name that is also one of its
    submodules: once anything imports that submodule, Python sets it as the package attribute and
    ``from package import name`` returns the module instead of the function."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="lakecdc."):
        if not info.ispkg:
            continue
        package = importlib.import_module(info.name)
        if not hasattr(package, "__getattr__"):
            continue
        submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        clash = sorted(submodules & set(getattr(package, "__all__", [])))
        assert not clash, f"{info.name} exports {clash}, which are also its submodules"
    import lakecdc.runtime.resnapshots  # noqa: F401  (imported first, as the Dagster definitions do)
    from lakecdc.runtime import resnapshot

    assert callable(resnapshot) and resnapshot.__module__ == "lakecdc.runtime.resnapshots"


def test_data_flows_one_way_between_layers():
    """source -> transform -> sink -> runtime / paimon -> dagster: no layer imports a later one (the transform layer
    knows no sink, the source no transform)."""
    order = {"source": 0, "transform": 1, "sink": 2, "runtime": 3, "paimon": 3, "dagster": 4}

    def layer(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in order else None

    for module, targets in import_graph(module_level_only=False).items():
        here = layer(module)
        if here is None:
            continue
        later = sorted(t for t in targets if (there := layer(t)) is not None and order[there] > order[here])
        assert not later, f"{module} imports {later}: a later layer"
