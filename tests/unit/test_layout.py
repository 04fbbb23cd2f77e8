"""The import graph of ``sgs/`` and ``lean_env/``: no circles, and the arrows
point one way (a newcomer can read a module knowing only what is below it);
and no module longer than one sitting's reading.

The graph is read statically with :mod:`ast`, imports inside functions
included: an import moved into a function to dodge a circle at load time is
still a circle for the reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO, TESTS

PACKAGES = ("sgs", "lean_env")


def module_files() -> dict[str, Path]:
    """Every module of the packages, by dotted name (a package by its ``__init__``)."""
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name the module's import statements mention (absolute, ``from`` names included)."""
    names = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports (a name resolves to its longest module prefix)."""
    modules = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {resolve(name) for name in imported_names(module, path)}
        # A module importing its own package's __init__ (or itself) is not an edge worth reading.
        graph[module] = {t for t in targets if t and t != module and not module.startswith(t + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_circle_finder_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert reachable(graph, "d") == {"a", "b", "c"}


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_verifier_package_knows_nothing_of_the_trainer():
    """``lean_env`` stands alone (its own command, gym environments); ``sgs`` builds on it."""
    graph = import_graph()
    for module in graph:
        if module.startswith("lean_env"):
            assert not {m for m in graph[module] if m.startswith("sgs")}, module


def test_the_config_schema_loads_no_data():
    """Validating a config reads names and paths, never targets, benchmarks or corpora."""
    loading = {"sgs.state.targets", "sgs.state.benchmarks", "sgs.state.warmstart", "sgs.state.store"}
    assert not reachable(import_graph(), "sgs.config") & loading


def test_the_measurement_library_does_not_import_the_commands():
    """The loop and the warm start measure through :mod:`sgs.analysis.evaluation`; the
    entry points (the run, the evaluation command, the warm start) sit above them."""
    graph = import_graph()
    entry_points = {"sgs.__main__", "sgs.evaluate", "sgs.sft"}
    for module in ("sgs.loop", "sgs.analysis.evaluation", "sgs.machinery.runtime", "sgs.state.store"):
        assert not reachable(graph, module) & entry_points, module


#: The layers of ``sgs``, lowest first; a module may import from its own layer and the ones below.
#: ``config`` (the schema, imported by every layer) and ``data`` (files) sit under all of them;
#: ``search`` holds the tactic search with the corpus and the prover it stands on (the Solver's
#: search mode of the loop imports them).
LAYERS = ("config", "method", "state", "machinery", "analysis", "search", "loop", "entry points")
#: Packages in a layer of another name.
PACKAGE_LAYERS = {"data": "config", "corpus": "search", "prover": "search"}
#: Upward imports that remain, each for a reason; a new one fails the test, and removing one of
#: these without deleting its line fails it too (so the list stays true).
KNOWN_UPWARD = {
    # the sample type is the engines'; the cache stores samples as the engines return them
    ("sgs.state.sample_cache", "sgs.machinery.engines"),
    # the gauges publish the metrics line's rejection keys under the same prefix
    ("sgs.machinery.monitor", "sgs.analysis.metrics"),
}


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "sgs" or len(parts) == 1:
        return -1  # lean_env and the package itself: below everything in sgs
    if parts[1] in PACKAGE_LAYERS:
        return LAYERS.index(PACKAGE_LAYERS[parts[1]])
    if parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return LAYERS.index("entry points")


def test_imports_point_down_the_layers():
    graph = import_graph()
    upward = {(module, target) for module, targets in graph.items() for target in targets
              if module.startswith("sgs.") and layer_of(target) > layer_of(module)}
    assert upward == KNOWN_UPWARD


#: About what one sitting reads: a module longer than this does more than one job.
MAX_MODULE_LINES = 600
#: Modules allowed to be longer (none now): a new long module fails the test, and one listed
#: here that is no longer long fails it too (so the list stays true).
KNOWN_LONG: set[str] = set()


def test_no_module_is_longer_than_a_sitting():
    # the commands and benchmarks too: their data lives in data files (tools/rocq_targets.toml)
    scripts = [path for folder in ("tools", "benchmarks") for path in (REPO / folder).rglob("*.py")]
    long = {path.relative_to(REPO).as_posix() for path in [*module_files().values(), *scripts]
            if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES}
    assert long == KNOWN_LONG


def objective_name_branches(path: Path, names: set[str], role_names: set[str] = frozenset()) -> list[str]:
    """Where a module branches on an objective's name: a comparison with one of ``names``
    (``==``, ``!=``, ``in``, ``not in``, against a literal or a literal tuple, list or set), or
    a dict literal keyed by two or more of them (a dispatch table).  ``role_names`` are
    objectives named after a role (the Conjecturer's): roles are compared by name, so only a
    comparison of one with an expression that mentions an objective counts."""
    def named(node: ast.AST, among: set[str]) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in among
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(element, among) for element in node.elts)
        return False

    where = path.relative_to(REPO) if REPO in path.parents else path
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(named(side, names) for side in sides) or (
                    any(named(side, role_names) for side in sides)
                    and any("objective" in ast.unparse(side).lower() for side in sides)):
                found.append(f"{where}:{node.lineno}: compares an objective name")
        elif isinstance(node, ast.Dict) and sum(named(key, names) for key in node.keys if key is not None) >= 2:
            found.append(f"{where}:{node.lineno}: a table keyed by objective names")
    return found


def test_the_scan_for_objective_names_finds_planted_branches(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('if objective == "cispo":\n    pass\nok = name in ("ei", "x")\n'
                       'table = {"reinforce": 1, "cispo": 2}\nfine = name == "cispo_like"\n'
                       'loss = a if objective == "conjecturer" else b\nrole_ok = role == "conjecturer"\n')
    assert len(objective_name_branches(planted, {"cispo", "ei", "reinforce"}, {"conjecturer"})) == 4


def test_only_the_registry_branches_on_an_objectives_name():
    """Each objective is one entry of :mod:`sgs.method.registry`; the loop, the learner and the
    config ask the entry (``objective(name).whole_groups``, ``.loss``, ...), never the name."""
    from sgs.config.schema import ROLES
    from sgs.method.registry import OBJECTIVES

    names = set(OBJECTIVES)
    method = REPO / "sgs" / "method"
    found = [branch for path in module_files().values() if method not in path.parents
             for branch in objective_name_branches(path, names - set(ROLES), names & set(ROLES))]
    assert found == []


#: The classes that own a set of supervised Ray actors (:mod:`lean_env.supervised`).
ACTOR_POOLS = {"lean_env/pool.py": "VerifierPool", "sgs/machinery/engines/group.py": "EngineGroup"}
MAX_INIT_LINES = 40


def test_the_actor_pools_share_one_supervision_and_take_a_settings_object():
    """Reserving, starting, replacing and shutting down actors lives in one
    module; each pool's constructor takes its settings as one object and stays
    short enough to read at a glance."""
    for relative, name in ACTOR_POOLS.items():
        tree = ast.parse((REPO / relative).read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "lean_env.supervised" for alias in node.names}
        assert "SupervisedActors" in imported, relative
        assert "placement_group" not in {alias.name for node in ast.walk(tree)
                                         if isinstance(node, ast.ImportFrom) for alias in node.names}, relative
        [init] = [node for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) and cls.name == name
                  for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"]
        assert init.end_lineno - init.lineno + 1 < MAX_INIT_LINES, f"{name}.__init__ is too long"
        parameters = [arg.arg for arg in [*init.args.args, *init.args.kwonlyargs] if arg.arg != "self"]
        assert len(parameters) <= 4 and "settings" in parameters, (name, parameters)


#: The layers of ``tests/`` (docs/tests.md: what each may use).
TEST_LAYERS = ("unit", "integration", "e2e")


def test_every_test_file_sits_in_a_layer_in_a_package_under_a_name_of_its_own():
    """Each test file is under ``tests/unit``, ``tests/integration`` or
    ``tests/e2e``; every folder down to it is a package (tests import each
    other by dotted name); and no two share a file name (``conftest.py``
    orders the heavy files by name)."""
    files = sorted(TESTS.rglob("test_*.py"))
    assert [str(p.relative_to(TESTS)) for p in files if p.relative_to(TESTS).parts[0] not in TEST_LAYERS] == []
    names = [p.name for p in files]
    assert sorted({name for name in names if names.count(name) > 1}) == []
    folders = {folder for p in files for folder in p.parents if TESTS in folder.parents}
    assert sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()) == []
