"""The house rules of ``DESIGN.md`` that a machine can check, read from the source (nothing is
imported or executed):

* the import graph of ``src/mrtr_sansio`` has no cycle, and no import runs up the layers
  (vocabulary below the pure parts, parts below the role machines, the core below the front
  door, the adapters and the testing kit); ``TYPE_CHECKING``-only and function-local imports
  count like any other, so a back-import hidden from the runtime is still a cycle here;
* no module reads, writes or deletes another module's object's ``_private`` attribute.

The private-attribute rule, precisely: in module *M*, ``E._name`` (any context; one leading
underscore, not a dunder) is allowed when ``E`` is the name ``self`` or ``cls``, or when
``_name`` is a member of a class defined in *M* (a ``def``, nested class or assignment in its
body -- attrs fields included -- or a ``self._name``/``cls._name`` assignment in *M*): the module
that defines a class may touch its privates on any instance of it. ``getattr``, ``setattr``,
``hasattr``, ``delattr`` and ``object.__setattr__`` with a literal ``"_name"`` on anything but
``self``/``cls`` follow the same rule. :data:`PUBLIC_UNDERSCORE` lists the few underscored names
that are public API of the standard library (``namedtuple._replace`` and friends).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "mrtr_sansio"

#: The layers, lowest first. A module may import modules of its own layer or below; within a
#: layer the cycle check keeps the graph a DAG. A new module must be placed here.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "wire and values",
        frozenset(
            {
                # the subpackages' own modules hold a docstring and import nothing
                "_wire",
                "_mcp",
                "_server",
                "_client",
                "_errors",
                "_validators",
                "_wire.codec",
                "_wire.bounds",
                "_wire.framing",
                "_wire.jsonrpc",
                "http._facts",
                "http._param_headers",
                "http._names",
                "http._client_headers",
                "_mcp.capabilities",
                "_mcp.methods",
                "_mcp.mrtr_fields",
                "_mcp.values",
                "_mcp.envelope",
                "_mcp.session",
                "_server.registry",
                "sealing._state",
                "sealing._swap",
                "sealing._security",
                "sealing._envelope",
                "sealing._codecs",
                "sealing._replay",
                "_mcp.subscriptions",
                "_extras",
                "_public",
                "observe",  # the observer protocol and its facts: values, attrs only
            }
        ),
    ),
    (
        "vocabulary",
        frozenset(
            {
                "_events",
                "_pending",
                "_lifecycle",
                "_config",
                "tasks._values",
                "tasks._store",
                "tasks._settings",
                "tasks._runner",  # the round-runner protocol: events in, nothing done
            }
        ),
    ),
    (
        "pure parts",
        frozenset(
            {
                "_server.state",
                "_server.legacy",
                "_server.modern",
                "_server.shim",
                "_server.answers",
                "_server.observing",
                "_client.checks",
                "_client.calls",
                "_client.results",
                "_client.observing",
                "_client.era",
                "_client.server_requests",
                "_client.legacy_rounds",
                "_client.task_follow",
                "_client.http",
                "tasks._bounds",
                "tasks._outcomes",
                "tasks._machine",
                "tasks._client",
                "tasks._server",
                "sealing._at_rest",  # encrypts task records: raises the store's error
                "bridge",  # the era bridge's rules: public, IO-free, values and mapping only
                "bridge._tasks",  # which tasks a principal may reach through the bridge
                "bridge._facts",  # the downstream's facts, from the upstream's
                "bridge._limits",  # the bridge's bounds and its refusal
                "bridge._upstreams",  # which upstream connection serves, closes, is told
            }
        ),
    ),
    ("role machines", frozenset({"_connection", "_server.connection", "_client.connection"})),
    (
        "front door",  # re-exports only: the package and its public vocabulary modules
        frozenset({"", "tasks", "sealing", "http", "events", "errors", "config", "protocol"}),
    ),
    # specialist parts on top of the front door: IO adapters, the OpenTelemetry observer
    ("adapters", frozenset({"adapters", "otel"})),
    ("testing", frozenset({"testing"})),
)

#: Underscored names that are documented public API of the standard library.
PUBLIC_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

#: (module path, attribute) pairs allowed beyond the rule, each with its reason.
ALLOWED: dict[tuple[str, str], str] = {
    # ``HttpClient.connect`` is a classmethod factory: it wires the task group and closes the
    # httpx client of the instance it just built; both are fields of its base class in
    # adapters/_http_wire.py, which the subclass owns by inheritance.
    ("adapters/http.py", "_tg"): "factory of a subclass",
    ("adapters/http.py", "_http"): "factory of a subclass",
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name below ``mrtr_sansio`` -> (path, is package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


MODULES = _modules()


def _layer(module: str) -> int:
    for index, (_, members) in enumerate(LAYERS):
        if module in members or (index >= 5 and module.split(".", maxsplit=1)[0] in members):
            return index
    raise AssertionError(f"mrtr_sansio.{module} is in no layer of LAYERS: place it there")


def _targets(module: str, package: bool, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The package modules an import statement loads (names below ``mrtr_sansio``)."""
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        names: list[str] = []
    else:
        if node.level:
            parts = module.split(".") if module else []
            if not package:
                parts = parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(["mrtr_sansio", *parts, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        bases = [base]
        names = [alias.name for alias in node.names]
    for base in bases:
        if base != "mrtr_sansio" and not base.startswith("mrtr_sansio."):
            continue
        inner = base[len("mrtr_sansio.") :] if base != "mrtr_sansio" else ""
        submodules = [f"{inner}.{n}".lstrip(".") for n in names]
        hits = [s for s in submodules if s in MODULES]
        yield from hits or [inner]


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere (top level, functions, TYPE_CHECKING)."""
    graph: dict[str, set[str]] = {}
    for module, (path, package) in MODULES.items():
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _targets(module, package, node) if t != module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer than the importer's, as text."""
    bad = []
    for module, targets in sorted(graph.items()):
        mine = _layer(module)
        for target in sorted(targets):
            theirs = _layer(target)
            if theirs > mine:
                bad.append(
                    f"mrtr_sansio.{module} ({LAYERS[mine][0]}) imports "
                    f"mrtr_sansio.{target} ({LAYERS[theirs][0]})".replace("mrtr_sansio. ", " ")
                )
    return bad


def _class_members(tree: ast.Module) -> set[str]:
    """Names the module's classes define: body members and ``self.x``/``cls.x`` assignments."""
    members: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and _owner_is_self(sub.value)
                ):
                    members.add(sub.attr)
    return members


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORE


def _owner_is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def private_reaches() -> list[str]:
    """Every touch of another module's private attribute, as ``path:line: expression``."""
    found = []
    for path, _ in sorted(MODULES.values()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _class_members(tree)
        where = path.relative_to(PACKAGE)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                owner, name = node.value, node.attr
            elif (
                isinstance(node, ast.Call)
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and (
                    (isinstance(node.func, ast.Name) and node.func.id in _REFLECTION)
                    or ast.unparse(node.func) == "object.__setattr__"
                )
            ):
                owner, name = node.args[0], node.args[1].value
            else:
                continue
            if (
                _is_private(name)
                and not _owner_is_self(owner)
                and name not in own
                and (where.as_posix(), name) not in ALLOWED
            ):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


_REFLECTION = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_import_runs_up_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_no_module_touches_another_modules_private_attribute() -> None:
    assert private_reaches() == []


def test_the_checks_see_a_cycle_an_upward_import_and_a_reach_in() -> None:
    """The checkers themselves: each finds the fault it exists for."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert upward_imports({"_errors": {"_lifecycle"}, "_lifecycle": {"_errors"}}) == [
        "mrtr_sansio._errors (wire and values) imports mrtr_sansio._lifecycle (vocabulary)"
    ]
    tree = ast.parse(
        "class A:\n    _x = 1\n    def f(self, o):\n        self._y = o._x\n        return o._y\n"
    )
    assert _class_members(tree) == {"_x", "_y", "f"}
    assert _is_private("_out")
    assert not _is_private("__init__")
    assert not _is_private("_replace")


def private_imports() -> list[str]:
    """Every ``from <package module> import _name``: a name another module uses is shared, and
    a shared name has a home that says so (no leading underscore)."""
    found: list[str] = []
    for module, (path, package) in sorted(MODULES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and any(_targets(module, package, node)):
                found.extend(
                    f"mrtr_sansio.{module}:{node.lineno}: {alias.name}"
                    for alias in node.names
                    if _is_private(alias.name)
                )
    return found


#: The role packages: only the front door, the adapters and the testing kit import them
#: from outside (the vocabulary, the task machine and the wire know neither role).
ROLES = ("_server", "_client")


def role_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a role package's module from a module below the front door that is
    not in that package, as text (the server and the client never import each other)."""
    front = next(i for i, (name, _) in enumerate(LAYERS) if name == "front door")
    bad = []
    for module, targets in sorted(graph.items()):
        home = module.split(".", maxsplit=1)[0]
        for target in sorted(targets):
            role = target.split(".", maxsplit=1)[0]
            if role in ROLES and role != home and _layer(module) < front:
                bad.append(f"mrtr_sansio.{module} imports mrtr_sansio.{target}")
    return bad


def test_no_module_imports_another_modules_private_name() -> None:
    assert private_imports() == []


def test_only_the_front_door_and_above_import_a_role() -> None:
    assert role_imports(import_graph()) == []
    assert role_imports({"_events": {"_server.session"}, "tasks._client": {"_client.checks"}}) == [
        "mrtr_sansio._events imports mrtr_sansio._server.session",
        "mrtr_sansio.tasks._client imports mrtr_sansio._client.checks",
    ]


def test_every_module_is_placed_in_a_layer() -> None:
    for module in MODULES:
        _layer(module)


#: The modules that own a connection's queues (``_events``, ``_out``): the role machines.
QUEUE_OWNERS = frozenset({"_connection", "_server.connection", "_client.connection"})
#: What a connection queues into; a part returns what to queue instead. ``deque`` (the type of
#: both) catches a part handed a queue under another name (``def read(self, events: deque)``).
QUEUE_NAMES = frozenset({"_events", "_out", "deque"})


def queue_touches(modules: dict[str, tuple[Path, bool]]) -> list[str]:
    """Every core module outside :data:`QUEUE_OWNERS` that names a connection's queue
    (an attribute or a name ``_events``/``_out``) or the ``deque`` type: a pure part handed a
    queue, or holding one, could append to it; it returns what to queue instead."""
    found = []
    for module, (path, _) in sorted(modules.items()):
        top = module.split(".")[0]
        if module in QUEUE_OWNERS or top in ("adapters", "testing"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else node.arg
                if isinstance(node, ast.arg)
                else None
            )
            if name in QUEUE_NAMES:
                found.append(f"mrtr_sansio.{module}:{node.lineno}: {name}")  # type: ignore[attr-defined]
    return found


def test_only_the_role_machines_touch_their_queues() -> None:
    assert queue_touches(MODULES) == []


def test_the_queue_check_sees_a_part_holding_a_queue(tmp_path: Path) -> None:
    part = tmp_path / "part.py"
    part.write_text("class Gate:\n    def __init__(self, events):\n        self._events = events\n")
    assert queue_touches({"_server.part": (part, False)}) == ["mrtr_sansio._server.part:3: _events"]
    assert queue_touches({"_server.connection": (part, False)}) == []
    renamed = tmp_path / "renamed.py"
    renamed.write_text(
        "import collections\n\ndef read(queue: collections.deque[int]) -> None:\n"
        "    queue.append(1)\n"
    )
    assert queue_touches({"_server.part": (renamed, False)}) == [
        "mrtr_sansio._server.part:3: deque"
    ]


#: What changes a container in place: a part calling one of these on an object it was handed
#: writes into its caller's state.
MUTATORS = frozenset(
    {
        "add",
        "append",
        "appendleft",
        "clear",
        "discard",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popitem",
        "popleft",
        "remove",
        "reverse",
        "setdefault",
        "sort",
        "update",
    }
)


def _names(node: ast.expr | None) -> set[str]:
    return set() if node is None else {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _arguments(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = func.args
    extra = [arg for arg in (a.vararg, a.kwarg) if arg is not None]
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *extra]


def _rebound(func: ast.AST) -> set[str]:
    """The names a function assigns as a whole (``params = dict(params)``): a fresh value."""
    return {
        t.id
        for node in ast.walk(func)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }


#: Writes into a handed object that are known and owned by another change (module, what).
KNOWN_FOREIGN_WRITES: frozenset[tuple[str, str]] = frozenset()


def _handed(func: ast.FunctionDef | ast.AsyncFunctionDef, local: set[str]) -> dict[str, set[str]]:
    """The handed parameters of ``func`` and the names their annotations use."""
    if func.name.startswith("_") and not func.name.startswith("__"):
        return {}
    rebound = _rebound(func)
    return {
        arg.arg: _names(arg.annotation)
        for arg in _arguments(func)
        if arg.arg not in ("self", "cls", *rebound) and not _names(arg.annotation) & local
    }


def _scan(
    module: str,
    body: ast.AST,
    roots: dict[str, set[str]],
    held: dict[str, set[str]],
    ours: set[str],
) -> list[str]:
    """The foreign writes in ``body`` (:func:`foreign_writes`)."""
    found: list[str] = []

    def foreign(node: ast.expr) -> tuple[str, set[str]] | None:
        if isinstance(node, ast.Name) and node.id in roots:
            return node.id, roots[node.id]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr in held
        ):
            return f"self.{node.attr}", held[node.attr]
        return None

    for node in ast.walk(body):
        whats = []
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in MUTATORS:
                hit = foreign(f.value)
                if hit is not None and not hit[1] & ours:
                    whats.append(f"{hit[0]}.{f.attr}()")
            elif isinstance(f, ast.Name | ast.Attribute) and node.args:
                name = f.id if isinstance(f, ast.Name) else f.attr
                hit = foreign(node.args[0])
                if name in ("setattr", "delattr", "__setattr__", "__delattr__") and hit:
                    whats.append(f"{name}({hit[0]})")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                if isinstance(t, ast.Attribute | ast.Subscript):
                    hit = foreign(t.value)
                    if hit is not None:
                        whats.append(f"{hit[0]} written")
        found.extend(
            f"mrtr_sansio.{module}:{node.lineno}: {what}"  # type: ignore[attr-defined]
            for what in whats
            if (module, what) not in KNOWN_FOREIGN_WRITES
        )
    return found


def foreign_writes(modules: dict[str, tuple[Path, bool]]) -> list[str]:
    """Every write a core part makes into an object it was handed and does not own.

    A part (a core module outside the role machines) owns the objects of the classes it
    defines and what it builds. What a public function or method is handed -- a parameter
    other than ``self``/``cls`` whose annotation names no class of the module and that the
    function does not rebind, or ``self.X`` set from a parameter -- it may read, and call the
    methods of the package's own classes on, but not change: no :data:`MUTATORS` call on it
    (unless its annotation names a class of the package: that class's owner decides), no
    assignment or ``del`` of its attributes or items, no ``setattr``. A private function
    (``_name``) is the module's own helper: its parameters are the module's working values,
    but ``self.X`` is checked there too. A part returns what should change instead, and the
    owner applies it (DESIGN: parts take values and return values)."""
    trees = {m: ast.parse(path.read_text(encoding="utf-8")) for m, (path, _) in modules.items()}
    ours = {
        n.name for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
    }
    found = []
    for module, tree in sorted(trees.items()):
        if module in QUEUE_OWNERS or module.split(".")[0] in ("adapters", "testing"):
            continue
        local = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        funcs = (ast.FunctionDef, ast.AsyncFunctionDef)

        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [m for m in node.body if isinstance(m, funcs)]
                held: dict[str, set[str]] = {}
                for method in methods:
                    params = {
                        arg.arg: _names(arg.annotation)
                        for arg in _arguments(method)
                        if arg.arg not in ("self", "cls") and not _names(arg.annotation) & local
                    }
                    for sub in ast.walk(method):
                        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name):
                            for t in sub.targets:
                                if (
                                    sub.value.id in params
                                    and isinstance(t, ast.Attribute)
                                    and isinstance(t.value, ast.Name)
                                    and t.value.id == "self"
                                ):
                                    held[t.attr] = params[sub.value.id]
                for method in methods:
                    found += _scan(module, method, _handed(method, local), held, ours)
            elif isinstance(node, ast.Module):
                for top in node.body:
                    if isinstance(top, funcs):
                        found += _scan(module, top, _handed(top, local), {}, ours)
    return sorted(set(found))


def test_no_part_writes_into_what_it_was_handed() -> None:
    assert foreign_writes(MODULES) == []


def test_the_write_check_sees_a_part_changing_what_it_was_handed(tmp_path: Path) -> None:
    # StateGate as it was: handed the connection's deque, it appended the rejection to it
    gate = tmp_path / "gate.py"
    gate.write_text(
        "class Gate:\n"
        "    def __init__(self, config: Config, events: deque[Event]) -> None:\n"
        "        self._events = events\n"
        "    def _reject(self, rid: int) -> None:\n"
        "        self._events.append(Rejected(rid))\n"
    )
    # legacy.on_request as it was: it set the level on the connection's session
    part = tmp_path / "part.py"
    part.write_text(
        "def on_request(session: LegacySession, params: dict[str, Any], out: list[int]) -> None:\n"
        "    session.log_level = params['level']\n"
        "    out.extend([1])\n"
        "    setattr(session, 'initialized', True)\n"
    )
    assert foreign_writes({"_server.gate": (gate, False), "_server.part": (part, False)}) == [
        "mrtr_sansio._server.gate:5: self._events.append()",
        "mrtr_sansio._server.part:2: session written",
        "mrtr_sansio._server.part:3: out.extend()",
        "mrtr_sansio._server.part:4: setattr(session)",
    ]
    # what stays allowed: its own classes, what it rebinds, its private helpers, methods of
    # the package's classes, and the role machines themselves
    fine = tmp_path / "fine.py"
    fine.write_text(
        "class Run:\n"
        "    pass\n"
        "def step(run: Run, params: dict[str, Any], machine: Machine) -> None:\n"
        "    run.phase = 1\n"
        "    params = dict(params)\n"
        "    params['x'] = 1\n"
        "    machine.update(params)\n"
        "def _fill(found: dict[str, str]) -> None:\n"
        "    found['a'] = 'b'\n"
        "class Machine:\n"
        "    def update(self, params: dict[str, Any]) -> None:\n"
        "        self.params = params\n"
    )
    assert (
        foreign_writes({"_server.fine": (fine, False), "_server.connection": (part, False)}) == []
    )
