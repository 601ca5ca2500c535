"""The codebase's shape, checked (#19): no import cycles among the product packages, no
module over ~400 lines without the reason written at its top, ``strata/`` never imports Ray,
no test patches a constructor, ranking figures stay in the parameter table
(``strata.recall.recipes``), no product module imports a test double (``strata.testing``),
and the HTTP face's route modules hold no state (routes are functions taking the replica's
services as FastAPI dependencies)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("strata", "actors", "serve_app", "jobs")
MAX_LINES = 400
LONG_REASON = "Why this module is long:"  # in the module docstring of a longer module


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The product modules ``name`` imports, including under ``TYPE_CHECKING`` (a cycle
    hidden there is still one design knot) and inside functions."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycles() -> None:
    modules = _modules()
    known = set(modules)
    # a package's __init__ importing its own submodules is not a cycle of design
    graph = {name: {t for t in _imports(name, path, known) if not t.startswith(name + ".")}
             for name, path in modules.items()}
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_long_modules_say_why() -> None:
    long = []
    for name, path in _modules().items():
        text = path.read_text()
        if text.count("\n") > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if LONG_REASON not in doc:
                long.append(f"{name} ({text.count(chr(10))} lines)")
    assert not long, f"over {MAX_LINES} lines with no '{LONG_REASON}' at the top: {long}"


def test_strata_never_imports_ray() -> None:
    offenders = [name for name, path in _modules().items()
                 if name.startswith("strata") and any(
                     t == "ray" or t.startswith("ray.")
                     for t in _raw_imports(path))]
    assert not offenders


def test_product_code_never_imports_a_test_double() -> None:
    """The doubles live in ``strata.testing`` for tests and benches; no product module
    (``strata`` outside it, ``actors``, ``serve_app``, ``jobs``) imports from there."""
    modules = _modules()
    known = set(modules)
    assert "strata.testing" in known
    offenders = sorted(
        f"{name} imports {target}" for name, path in modules.items()
        if name != "strata.testing" and not name.startswith("strata.testing.")
        for target in _imports(name, path, known)
        if target == "strata.testing" or target.startswith("strata.testing."))
    assert not offenders, offenders


def _raw_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


_CONSTRUCTOR_PATCH = re.compile(
    r"setattr\([^)]*[\"']__init__[\"']|\.__init__\s*=|patch(?:\.object)?\([^)]*__init__")


def test_no_test_patches_a_constructor() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py"))
                 if p.name != Path(__file__).name and _CONSTRUCTOR_PATCH.search(p.read_text())]
    assert not offenders


# non-ranking limits that may stay module constants in strata/recall (a ranking figure goes
# into strata.recall.recipes.RecallRecipe, the one table of ranking parameters)
RECALL_LIMITS = {
    "strata.recall.expansion.MAX_STATEMENT_CHARS",  # the LLM's statements cut to this length
    "strata.recall.late.MAX_STORED_TOKENS",  # token vectors kept per memory, at write time
    "strata.recall.late.MAX_PACKED_CHARS",  # the store's field their packed string must fit
}


def _module_figures(path: Path) -> list[tuple[str, int, bool]]:
    """Module-level assignments holding a number: (name, line, holds a float literal)."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        numbers = [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                   and isinstance(c.value, int | float) and not isinstance(c.value, bool)]
        bare_int = isinstance(node.value, ast.Constant) and bool(numbers)
        if any(isinstance(n, float) for n in numbers) or bare_int:
            out += [(name, node.lineno, any(isinstance(n, float) for n in numbers))
                    for name in names]
    return out


def test_ranking_figures_live_in_the_parameter_table() -> None:
    """No module of ``strata/recall`` but the table (``recipes``) binds a float at module
    level, nor a bare number constant outside ``RECALL_LIMITS``: a weight, a boost or a
    share is a ``RecallRecipe`` field with its description and source."""
    offenders = []
    for path in sorted((ROOT / "strata" / "recall").glob("*.py")):
        if path.name == "recipes.py":
            continue
        module = f"strata.recall.{path.stem}"
        for name, line, is_float in _module_figures(path):
            if is_float or f"{module}.{name}" not in RECALL_LIMITS:
                offenders.append(f"{module}:{line} {name}")
    assert not offenders, offenders


def test_the_figures_check_sees_a_module_constant(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("BOOST = 1.25\nLIMIT = 4\nWEIGHTS = {'a': 0.5}\ncache = f(maxsize=16)\n")
    assert _module_figures(path) == [("BOOST", 1, True), ("LIMIT", 2, False),
                                     ("WEIGHTS", 3, True)]


# -- the HTTP face: route modules hold no state ------------------------------------------------
ROUTE_MODULES = (*sorted((ROOT / "serve_app" / "routes").glob("*.py")),
                 ROOT / "serve_app" / "inspector.py")
# what a route module may bind at module level besides constants: its router, its logger,
# read-only mappings, compiled patterns, paths and dependency aliases (Annotated[...])
_ROUTE_MODULE_CALLS = {"api_router", "APIRouter", "getLogger", "compile", "Path",
                       "MappingProxyType", "frozenset", "tuple"}


def _immutable(node: ast.expr) -> bool:
    """Whether a module-level value holds no state: a constant, a tuple of them, a path
    expression, an ``Annotated[...]`` alias, or a call ``_ROUTE_MODULE_CALLS`` allows."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(_immutable(e) for e in node.elts)
    if isinstance(node, ast.BinOp):  # Path(__file__).parent / "ui"
        return _immutable(node.left) and _immutable(node.right)
    if isinstance(node, ast.Attribute):  # Path(__file__).parent
        return _immutable(node.value) or isinstance(node.value, ast.Name)
    if isinstance(node, ast.Name):
        return node.id == "__file__" or node.id.isupper()
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name) and node.value.id == "Annotated"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in _ROUTE_MODULE_CALLS
    return False


def _route_state(path: Path) -> list[str]:
    """What in a route module is state: a module-level binding of a mutable value (a dict,
    a list, a client, a cache), a ``global`` statement, a route that is a method, or a class
    whose methods take ``self`` (a route group handlers share as a base)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        if isinstance(node, ast.AugAssign):
            found.append(f"{path.name}:{node.lineno} module-level {ast.unparse(node.target)}")
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [ast.unparse(t) for t in targets]
            if names != ["__all__"] and not _immutable(node.value):
                found.append(f"{path.name}:{node.lineno} module-level {', '.join(names)}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                routed = any("router" in ast.unparse(d) for d in item.decorator_list)
                first = item.args.args[0].arg if item.args.args else ""
                if routed or first == "self":
                    found.append(f"{path.name}:{item.lineno} {node.name}.{item.name}: a route "
                                 "group's method (routes are functions taking dependencies)")
    found += [f"{path.name}:{n.lineno} global {', '.join(n.names)}" for n in ast.walk(tree)
              if isinstance(n, ast.Global)]
    return found


def test_route_modules_hold_no_state() -> None:
    """Routes are functions that take the replica's services as FastAPI dependencies
    (``serve_app.routes.deps``); what lives between requests is the ``Replica``'s."""
    assert len(ROUTE_MODULES) >= 8
    offenders = [f for path in ROUTE_MODULES for f in _route_state(path)]
    assert not offenders, offenders


def test_the_route_state_check_sees_state(tmp_path: Path) -> None:
    path = tmp_path / "routes.py"
    path.write_text(
        "import re\nfrom types import MappingProxyType\n__all__ = ['router']\n"
        "router = api_router()\nPATTERN = re.compile('x')\nFILES = MappingProxyType({})\n"
        "Dep = Annotated[int, Depends(f)]\nLIMIT = 4\n"
        "CACHE = {}\nseen: list[str] = []\nclient = RedisStore(URL)\nCOUNT = 0\nCOUNT += 1\n"
        "class Model(BaseModel):\n    x: int\n"
        "class Routes(IngressState):\n    @router.get('/a')\n    async def a(self): ...\n"
        "def f():\n    global COUNT\n")
    assert [f.split(" ", 1)[0] for f in _route_state(path)] == [
        "routes.py:9", "routes.py:10", "routes.py:11", "routes.py:13", "routes.py:18",
        "routes.py:20"]
