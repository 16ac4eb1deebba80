"""The import structure of the product code (DESIGN.md s.2): layers, no cycles, interfaces.

Every product module is parsed with `ast` (never imported): vectorlog/*.py and the root
folders streams/, processors/, schemas/ under their installed names vectorlog.streams.*,
vectorlog.processors.*, vectorlog.schemas.* (the symlinks under vectorlog/ are not walked).

Layers, bottom to top; nothing imports a module of a higher layer:
    L0  vectorlog.core.* (errors, model, types, faults, hybridts), vectorlog.expr.*
    L1  vectorlog.schemas.*
    L2  vectorlog.streams.*
    L3  the libraries shared by processors: vectorlog.storage.* (binlogs, object stores),
        vectorlog.state.* (state stores)
    L4  vectorlog.runtime.*: the processor loop and the topology (what processors run on)
    L5  vectorlog.processors.*: each imports another only through its service.py Protocol
    L6  vectorlog.engines.* (the Spark engine) and vectorlog.rpc.* (the RPC servers that wrap
        processors' services, and the network clients that implement them): processors only
        through their service.py
    L7  everything else: vectorlog (the package), jobs, sdk, cli, server, runners, config, ...
`import vectorlog.x` and `from vectorlog.x import y` import vectorlog.x (or the submodule
vectorlog.x.y), not the package `vectorlog`; `from vectorlog import Client` imports the
package, which is L7.

Which imports count: cycles are about what runs at import time, so they consider imports at
module level (class bodies included) but not those inside functions or `if TYPE_CHECKING:`.
Every other rule is about dependencies, so it considers every import anywhere in a module:
a lazy import inside a function is still a dependency on that module.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Root folders installed as subpackages of vectorlog (through the symlinks vectorlog/<name>).
SUBPACKAGES = ("streams", "processors", "schemas")
#: The packages of each layer below the top one (the top: everything else under vectorlog).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vectorlog.core", "vectorlog.expr"),
    ("vectorlog.schemas",),
    ("vectorlog.streams",),
    ("vectorlog.storage", "vectorlog.state"),
    ("vectorlog.runtime",),
    ("vectorlog.processors",),
    ("vectorlog.engines", "vectorlog.rpc"),
)
TOP = len(LAYERS)
LAYER_NAMES = {0: "L0 (core/expr)", 1: "L1 (schemas)", 2: "L2 (streams)"}
LAYER_NAMES |= {3: "L3 (libraries: storage/state)", 4: "L4 (runtime)", 5: "L5 (processors)"}
LAYER_NAMES |= {6: "L6 (engines, rpc)"}
LAYER_NAMES |= {TOP: f"L{TOP} (jobs, sdk, cli, server, runners)"}
#: Top-level names product code must never import: the repo folders under their own name
#: (they only exist as vectorlog.*) and the dev-only trees.
FORBIDDEN_TOP_LEVEL = frozenset(
    {"streams", "processors", "schemas", "infra", "tests", "benchmarks"}
)
#: Packages outside processors/ that may reach a processor only through its service.py.
THROUGH_SERVICES = ("vectorlog.engines", "vectorlog.rpc")
CLIENT_MAY_IMPORT = "vectorlog.processors.proxy.service"


@dataclass(frozen=True)
class Module:
    """A product module: its dotted name, source text, and whether it is a package."""

    name: str
    source: str
    is_package: bool = False
    path: str = ""


@dataclass(frozen=True)
class Import:
    """One import of `target` (a dotted module name) by `importer`, at `line`."""

    importer: str
    target: str
    line: int
    at_import_time: bool  # module level, outside functions and `if TYPE_CHECKING:`
    statement: str

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}: `{self.statement}`) imports {self.target}"


# -- finding the modules -------------------------------------------------------------------
def _module_name(base: str, rel: Path) -> tuple[str, bool]:
    parts = list(rel.with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join([base, *parts]), is_package


def _python_files(top: Path) -> Iterator[Path]:
    """The .py files under `top`, not descending into symlinked folders or __pycache__."""
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for f in sorted(filenames):
            if f.endswith(".py"):
                yield Path(dirpath) / f


def product_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every product module by dotted name. Each real file is read once, under its installed
    name, whether vectorlog/<sub> is a symlink to the root folder or a real folder."""
    trees = [("vectorlog", root / "vectorlog")]
    trees += [(f"vectorlog.{sub}", root / sub) for sub in SUBPACKAGES]
    modules: dict[str, Module] = {}
    seen: dict[Path, str] = {}
    for base, top in trees:
        for path in _python_files(top):
            real = path.resolve()
            name, is_package = _module_name(base, path.relative_to(top))
            if real in seen:
                assert seen[real] == name, f"{real} is reachable as {seen[real]} and {name}"
                continue
            seen[real] = name
            modules[name] = Module(name, path.read_text(encoding="utf-8"), is_package, str(path))
    return modules


# -- extracting imports -------------------------------------------------------------------
def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    nodes: Iterable[ast.stmt], at_import_time: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Yields every import statement with whether it runs when the module is imported."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, at_import_time
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk_any(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.body, False)
            yield from _walk(node.orelse, at_import_time)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None) or []
                stmts = [c for c in children if isinstance(c, ast.stmt)]
                # except handlers and match cases hold statements one level down
                stmts += [s for c in children if not isinstance(c, ast.stmt) for s in c.body]
                yield from _walk(stmts, at_import_time)


def _walk_any(node: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Yields every import inside a function: none runs when the module is imported."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, False


def _resolve_relative(module: Module, node: ast.ImportFrom) -> str:
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    parts = package.split(".")
    if node.level - 1 >= len(parts):
        raise ValueError(f"{module.name}: relative import beyond the top-level package")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def imports_of(module: Module, known: Iterable[str]) -> list[Import]:
    """The imports of one module. `from p import n` imports p.n when that is a known module,
    else p; relative imports are resolved against the module's package."""
    known = set(known)
    tree = ast.parse(module.source, filename=module.path or module.name)
    found: list[Import] = []
    for node, at_import_time in _walk(tree.body, True):
        statement = ast.unparse(node)
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve_relative(module, node) if node.level else (node.module or "")
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in dict.fromkeys(targets):
            found.append(Import(module.name, target, node.lineno, at_import_time, statement))
    return found


def all_imports(modules: dict[str, Module]) -> list[Import]:
    return [imp for m in modules.values() for imp in imports_of(m, modules)]


# -- the rules ------------------------------------------------------------------------------
def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer(name: str) -> int | None:
    """The layer of a product module, None for anything outside vectorlog."""
    for number, packages in enumerate(LAYERS):
        if any(_within(name, p) for p in packages):
            return number
    return TOP if _within(name, "vectorlog") else None


def layer_violations(imports: Iterable[Import]) -> list[str]:
    out = []
    for imp in imports:
        low, high = layer(imp.importer), layer(imp.target)
        if low is not None and high is not None and high > low:
            out.append(f"{imp}: {LAYER_NAMES[low]} must not import {LAYER_NAMES[high]}")
    return out


def forbidden_name_violations(imports: Iterable[Import]) -> list[str]:
    return [
        f"{imp}: `{imp.target.split('.')[0]}` is not a product package (use vectorlog.*)"
        for imp in imports
        if imp.target.split(".")[0] in FORBIDDEN_TOP_LEVEL
    ]


def _processor(name: str) -> str | None:
    """The processor package (rootcoord, proxy, ...) a module belongs to, if any."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["vectorlog", "processors"] else None


def processor_interface_violations(imports: Iterable[Import]) -> list[str]:
    out = []
    for imp in imports:
        mine, theirs = _processor(imp.importer), _processor(imp.target)
        if mine is None and any(_within(imp.importer, p) for p in THROUGH_SERVICES):
            mine = imp.importer
        if mine is None or theirs is None or theirs == mine:
            continue
        interface = f"vectorlog.processors.{theirs}.service"
        if imp.target != interface:
            out.append(f"{imp}: processor {mine!r} may only import {interface} of {theirs!r}")
    return out


def client_violations(imports: Iterable[Import]) -> list[str]:
    return [
        f"{imp}: the client may import only {CLIENT_MAY_IMPORT} from vectorlog.processors"
        for imp in imports
        if imp.importer == "vectorlog.sdk.client"
        and _within(imp.target, "vectorlog.processors")
        and imp.target != CLIENT_MAY_IMPORT
    ]


def cycle_violations(imports: Iterable[Import], modules: Iterable[str]) -> list[str]:
    """One message per import cycle (per strongly connected component), showing a cycle."""
    nodes = set(modules)
    edges: dict[str, dict[str, Import]] = {n: {} for n in nodes}
    for imp in imports:
        if imp.at_import_time and imp.target in nodes:
            edges[imp.importer].setdefault(imp.target, imp)
    out = []
    for component in _strongly_connected(edges):
        start = min(component)
        if len(component) == 1 and start not in edges[start]:
            continue
        path = _cycle_through(start, component, edges)
        steps = "\n    ".join(str(edges[a][b]) for a, b in zip(path, path[1:], strict=False))
        out.append(f"import cycle {' -> '.join(path)}:\n    {steps}")
    return out


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                result.append(component)
    return result


def _cycle_through(
    start: str, component: set[str], edges: dict[str, dict[str, Import]]
) -> list[str]:
    """A shortest path start -> ... -> start inside the component (breadth first)."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node]):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parent:
                    parent[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def check(modules: dict[str, Module]) -> dict[str, list[str]]:
    """Every rule's violations, by rule name."""
    imports = all_imports(modules)
    return {
        "cycles": cycle_violations(imports, modules),
        "layers": layer_violations(imports),
        "forbidden names": forbidden_name_violations(imports),
        "processor interfaces": processor_interface_violations(imports),
        "client": client_violations(imports),
    }


def report(rule: str, violations: list[str]) -> str:
    return f"{len(violations)} {rule} violation(s):\n  " + "\n  ".join(violations)


# -- the tests on the real code ----------------------------------------------------------------
@pytest.fixture(scope="module")
def real() -> dict[str, list[str]]:
    return check(product_modules())


def test_the_module_map_holds_every_product_module_once_under_its_installed_name():
    modules = product_modules()
    expected = {
        "vectorlog",
        "vectorlog.sdk.client",
        "vectorlog.core.errors",
        "vectorlog.streams",
        "vectorlog.streams.log.base",
        "vectorlog.processors",
        "vectorlog.processors.rootcoord.tso",
        "vectorlog.processors.querynode.replica",
        "vectorlog.schemas.columns",
    }
    assert expected <= set(modules), f"missing: {sorted(expected - set(modules))}"
    assert not [n for n in modules if n.startswith(("streams", "processors", "schemas"))]
    paths = [Path(m.path).resolve() for m in modules.values()]
    assert len(paths) == len(set(paths))
    assert (
        modules["vectorlog.streams"].is_package and not modules["vectorlog.sdk.client"].is_package
    )
    count = len(list(_python_files(ROOT / "processors")))
    assert len([n for n in modules if _within(n, "vectorlog.processors")]) == count


def test_no_import_cycles(real):
    assert not real["cycles"], report("cycle", real["cycles"])


def test_no_module_imports_a_higher_layer(real):
    assert not real["layers"], report("layer", real["layers"])


def test_no_bare_repo_folder_or_dev_tree_imports(real):
    assert not real["forbidden names"], report("import-name", real["forbidden names"])


def test_processors_import_each_other_only_through_their_service_interface(real):
    found = real["processor interfaces"]
    assert not found, report("processor-interface", found)


def test_the_client_reaches_processors_only_through_the_proxy_service(real):
    assert not real["client"], report("client", real["client"])


# -- the checker catches what it should (so the tests above cannot pass vacuously) ----------------
def fake(sources: dict[str, str], packages: Iterable[str] = ()) -> dict[str, Module]:
    pkgs = set(packages)
    return {n: Module(n, s, n in pkgs, f"<{n}>") for n, s in sources.items()}


CLEAN = {
    "vectorlog": "from vectorlog.core.errors import E\n",
    "vectorlog.core.errors": "class E(Exception): ...\n",
    "vectorlog.core.model": "from vectorlog.core.errors import E\n",
    "vectorlog.schemas": "",
    "vectorlog.schemas.serde": "import json\nfrom vectorlog.core.model import M\n",
    "vectorlog.streams": "",
    "vectorlog.streams.log": "from .base import Log\n",
    "vectorlog.streams.log.base": "from vectorlog.schemas import serde\n",
    "vectorlog.processors": "",
    "vectorlog.state": "",
    "vectorlog.state.kv": "from vectorlog.streams.log.base import Log\n",
    "vectorlog.runtime": "",
    "vectorlog.runtime.loop": (
        "from vectorlog.state.kv import KV\nfrom vectorlog.streams.log.base import Log\n"
    ),
    "vectorlog.processors.rootcoord": "",
    "vectorlog.storage": "",
    "vectorlog.storage.binlog": "from vectorlog.state.kv import KV\n",
    "vectorlog.processors.rootcoord.service": "from vectorlog.state import kv\n",
    "vectorlog.processors.rootcoord.tso": (
        "from . import service\nfrom vectorlog.runtime.loop import ProcessorLoop\n"
    ),
    "vectorlog.processors.proxy": "",
    "vectorlog.processors.proxy.service": "",
    "vectorlog.processors.proxy.proxy": (
        "from typing import TYPE_CHECKING\n"
        "from vectorlog.processors.rootcoord.service import RootCoord\n"
        "from vectorlog.state.kv import KV\n"
        "from vectorlog.processors.proxy import service\n"
    ),
    "vectorlog.sdk.client": (
        "from vectorlog.processors.proxy.service import Proxy\nimport vectorlog\n"
    ),
    "vectorlog.engines": "",
    "vectorlog.engines.spark": "from vectorlog.processors.proxy.service import P\n",
    "vectorlog.runners.standalone": "from vectorlog.processors.proxy.proxy import Proxy\n",
    "vectorlog.rpc": "",
    "vectorlog.rpc.server": "from vectorlog.processors.rootcoord.service import RootCoord\n",
    "vectorlog.jobs.rebuild": "from vectorlog.engines.spark import S\n",
}
PACKAGES = {
    "vectorlog",
    "vectorlog.schemas",
    "vectorlog.streams",
    "vectorlog.streams.log",
    "vectorlog.processors",
    "vectorlog.state",
    "vectorlog.storage",
    "vectorlog.runtime",
    "vectorlog.engines",
    "vectorlog.engines.spark",
    "vectorlog.rpc",
    "vectorlog.processors.rootcoord",
    "vectorlog.processors.proxy",
}


def test_the_checker_passes_a_clean_fake_tree():
    assert check(fake(CLEAN, PACKAGES)) == {rule: [] for rule in check(fake(CLEAN, PACKAGES))}


@pytest.mark.parametrize(
    ("rule", "module", "source", "expected"),
    [
        (
            "cycles",
            "vectorlog.schemas.serde",
            "from vectorlog.schemas.registry import R\n",
            "import cycle vectorlog.schemas.registry -> vectorlog.schemas.serde -> "
            "vectorlog.schemas.registry",
        ),
        ("layers", "vectorlog.core.model", "from vectorlog import Client\n", "L7"),
        (
            "layers",
            "vectorlog.storage.binlog",
            "from vectorlog.processors.proxy.service import P\n",
            "L3 (libraries: storage/state) must not import L5 (processors)",
        ),
        (
            "layers",
            "vectorlog.runtime.loop",
            "from vectorlog.processors.proxy.service import P\n",
            "L4 (runtime) must not import L5 (processors)",
        ),
        (
            "layers",
            "vectorlog.storage.binlog",
            "from vectorlog.runtime.loop import ProcessorLoop\n",
            "L3 (libraries: storage/state) must not import L4 (runtime)",
        ),
        (
            "layers",
            "vectorlog.processors.proxy.proxy",
            "from vectorlog.engines.spark import S\n",
            "L5 (processors) must not import L6 (engines, rpc)",
        ),
        (
            "layers",
            "vectorlog.processors.proxy.proxy",
            "from vectorlog.rpc.server import RpcServer\n",
            "L5 (processors) must not import L6 (engines, rpc)",
        ),
        (
            "layers",
            "vectorlog.rpc.server",
            "from vectorlog.runners.standalone import Standalone\n",
            "L6 (engines, rpc) must not import L7",
        ),
        ("layers", "vectorlog.schemas.serde", "import vectorlog.streams.channels\n", "L2"),
        (
            "layers",
            "vectorlog.streams.log.base",
            "def lazy():\n    from vectorlog.processors.rootcoord import tso\n",
            "vectorlog.streams.log.base (line 3: `from vectorlog.processors.rootcoord import "
            "tso`) imports vectorlog.processors.rootcoord.tso: L2 (streams) must not import "
            "L5 (processors)",
        ),
        ("forbidden names", "vectorlog.sdk.client", "from streams.log import base\n", "`streams`"),
        ("forbidden names", "vectorlog.runners.standalone", "import infra.broker\n", "`infra`"),
        (
            "processor interfaces",
            "vectorlog.processors.proxy.proxy",
            "from vectorlog.processors.rootcoord.tso import TimestampOracle\n",
            "may only import vectorlog.processors.rootcoord.service of 'rootcoord'",
        ),
        (
            "processor interfaces",
            "vectorlog.processors.proxy.proxy",
            "from ..rootcoord import tso\n",
            "imports vectorlog.processors.rootcoord.tso",
        ),
        (
            "processor interfaces",
            "vectorlog.engines.spark",
            "from vectorlog.processors.proxy.importfiles import read_unit\n",
            "may only import vectorlog.processors.proxy.service of 'proxy'",
        ),
        (
            "processor interfaces",
            "vectorlog.rpc.server",
            "from vectorlog.processors.rootcoord.rootcoord import RootCoord\n",
            "may only import vectorlog.processors.rootcoord.service of 'rootcoord'",
        ),
        (
            "client",
            "vectorlog.sdk.client",
            "from vectorlog.processors.proxy.proxy import Proxy\n",
            "the client may import only vectorlog.processors.proxy.service",
        ),
    ],
)
def test_the_checker_flags_a_synthetic_violation(rule, module, source, expected):
    sources = {**CLEAN, module: CLEAN.get(module, "") + source}
    if rule == "cycles":
        sources["vectorlog.schemas.registry"] = "from vectorlog.schemas.serde import S\n"
    found = check(fake(sources, PACKAGES))
    assert any(expected in v for v in found[rule]), report(rule, found[rule])
    assert {r for r, v in found.items() if v} == {rule}, found


def test_cycles_ignore_imports_in_functions_and_type_checking_blocks():
    sources = {
        **CLEAN,
        "vectorlog.schemas.serde": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from vectorlog.schemas.registry import R\n"
        ),
        "vectorlog.schemas.registry": "def f():\n    from vectorlog.schemas.serde import S\n",
    }
    assert check(fake(sources, PACKAGES))["cycles"] == []
    sources["vectorlog.schemas.serde"] += "else:\n    from vectorlog.schemas.registry import R\n"
    sources["vectorlog.schemas.registry"] = "class C:\n    from vectorlog.schemas.serde import S\n"
    assert len(check(fake(sources, PACKAGES))["cycles"]) == 1
