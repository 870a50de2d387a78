"""The front door stays small, the specialist modules say what they hold, and the migration
table, the codemod and the docs page agree."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

import mrtr_sansio as m
from mrtr_sansio import ErrorCode, JsonRpcError
from mrtr_sansio.config import OrjsonCodec, StdlibJsonCodec

# migrate_imports: skip (this file shows the old names to the codemod on purpose)
ROOT = Path(__file__).resolve().parents[1]
#: The public modules beside the front door, each with its own ``__all__``.
SUBMODULES = (
    "mrtr_sansio.sealing",
    "mrtr_sansio.http",
    "mrtr_sansio.events",
    "mrtr_sansio.errors",
    "mrtr_sansio.config",
    "mrtr_sansio.protocol",
)


def _codemod() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "migrate_imports", ROOT / "scripts/migrate_imports.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MIGRATE = _codemod()


def test_the_front_door_has_at_most_45_names() -> None:
    assert len(m.__all__) <= 45
    assert len(set(m.__all__)) == len(m.__all__)


@pytest.mark.parametrize("name", SUBMODULES)
def test_each_public_module_has_a_docstring_and_an_all(name: str) -> None:
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name}: no module docstring"
    assert module.__all__, f"{name}: empty __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


def test_every_moved_name_lives_where_the_table_says_and_left_the_front_door() -> None:
    for name, home in MIGRATE.MOVED.items():
        module = importlib.import_module(home)
        if name not in module.__all__:  # renamed since it moved: a deprecated alias remains
            with pytest.warns(DeprecationWarning, match=name):
                getattr(module, name)
        assert name not in m.__all__, f"{name} is still at the front door"
    for name in (*MIGRATE.ERROR_CODES, *MIGRATE.REMOVED):
        assert not hasattr(m, name), f"mrtr_sansio.{name} should be gone"


def test_every_submodule_name_is_one_object_with_one_definition() -> None:
    """A name in two public modules (``UNSEALED``, the events) is the same object in both."""
    seen: dict[str, object] = {name: getattr(m, name) for name in m.__all__}
    for module_name in SUBMODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            assert seen.setdefault(name, value) is value, f"{module_name}.{name} differs"


def test_error_codes_are_an_int_enum_with_the_spec_numbers() -> None:
    spec: dict[str, int] = {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "HEADER_MISMATCH": -32020,
        "MISSING_REQUIRED_CLIENT_CAPABILITY": -32021,
        "UNSUPPORTED_PROTOCOL_VERSION": -32022,
    }
    assert {code.name: int(code) for code in ErrorCode} == spec
    for name, number in spec.items():
        assert ErrorCode[name] == number  # an int, compared as one
        assert ErrorCode(number) is ErrorCode[name]
    assert set(MIGRATE.ERROR_CODES) == set(spec)
    assert str(ErrorCode.INVALID_PARAMS) == "-32602"  # on every Python, 3.10 included
    assert f"{ErrorCode.INVALID_PARAMS}" == "-32602"


@pytest.mark.parametrize("codec", [StdlibJsonCodec(), OrjsonCodec()], ids=["stdlib", "orjson"])
def test_an_error_code_goes_on_the_wire_as_a_plain_number(codec: object) -> None:
    wire = {"jsonrpc": "2.0", "id": 1, "error": JsonRpcError.invalid_params("no").to_wire()}
    data = codec.dumps(wire)  # type: ignore[attr-defined]
    assert b'"code":-32602' in data.replace(b" ", b"")
    assert json.loads(data)["error"]["code"] == -32602
    assert type(json.loads(data)["error"]["code"]) is int


def test_the_migration_page_shows_the_codemods_table() -> None:
    page = (ROOT / "docs" / "migration.md").read_text(encoding="utf-8")
    assert MIGRATE.table() in page


def test_the_codemod_rewrites_imports_uses_and_commands_once() -> None:
    before = (
        "import mrtr_sansio as m\n"
        "from mrtr_sansio import (\n"
        "    INVALID_PARAMS,\n"
        "    Respond,\n"
        "    AesGcmCodec,\n"
        "    ServerConnection,\n"
        "    mirrored_params,\n"
        ")\n"
        "from mrtr_sansio._state import UNSEALED\n"
        "\n"
        "def f(conn: ServerConnection) -> None:\n"
        "    conn.send(Respond(1, {'code': INVALID_PARAMS}))\n"
        "    conn.send(\n        Respond(2, m.JsonRpcError(m.INTERNAL_ERROR, 'x'))\n    )\n"
        "    print(m.HmacSha256Codec, AesGcmCodec, mirrored_params, UNSEALED, 'INVALID_PARAMS')\n"
    )
    assert MIGRATE.SKIP not in before
    after = MIGRATE.migrate(before, Path("example.py"))
    assert after == (
        "import mrtr_sansio as m\n"
        "from mrtr_sansio import ErrorCode, ServerConnection\n"
        "from mrtr_sansio.sealing import AesGcmCodec\n"
        "from mrtr_sansio.http import mirrored_params\n"
        "from mrtr_sansio.sealing._state import UNSEALED\n"
        "\n"
        "def f(conn: ServerConnection) -> None:\n"
        "    conn.respond(1, {'code': ErrorCode.INVALID_PARAMS})\n"
        "    conn.respond(2, m.JsonRpcError(m.ErrorCode.INTERNAL_ERROR, 'x'))\n"
        "    print(m.sealing.HmacSha256Codec, AesGcmCodec, mirrored_params, UNSEALED, "
        "'INVALID_PARAMS')\n"
    )
    assert MIGRATE.migrate(after, Path("example.py")) == after


def test_the_codemod_places_relative_imports_inside_the_package() -> None:
    path = ROOT / "src" / "mrtr_sansio" / "_example.py"
    before = (
        "from ._errors import INVALID_PARAMS, JsonRpcError\n"
        "from ._state import UNSEALED\n"
        "X = INVALID_PARAMS\n"
    )
    after = MIGRATE.migrate(before, path)
    assert after == (
        "from ._errors import ErrorCode, JsonRpcError\n"
        "from .sealing._state import UNSEALED\n"
        "X = ErrorCode.INVALID_PARAMS\n"
    )
    # above the file's own package the import is written absolute (ruff's TID252)
    inner = ROOT / "src" / "mrtr_sansio" / "adapters" / "_example.py"
    assert MIGRATE.migrate("from .. import Era, HttpRequestFacts\n", inner) == (
        "from mrtr_sansio import Era\nfrom mrtr_sansio.http import HttpRequestFacts\n"
    )


def test_the_tree_needs_no_more_migration() -> None:
    """Everything in the repository already uses the new names (the codemod changes nothing)."""
    paths = [ROOT / d for d in ("src", "tests", "examples", "bench", "docs")]
    files = list(MIGRATE.files([str(p) for p in paths]))
    stale = [
        str(p.relative_to(ROOT))
        for p in files
        if MIGRATE.migrate(p.read_text("utf-8"), p) != p.read_text("utf-8")
    ]
    assert stale == []


#: The public modules whose exported errors a user meets in tracebacks and the API reference.
PUBLIC_MODULES = [
    "mrtr_sansio",
    "mrtr_sansio.errors",
    "mrtr_sansio.events",
    "mrtr_sansio.config",
    "mrtr_sansio.protocol",
    "mrtr_sansio.tasks",
    "mrtr_sansio.sealing",
    "mrtr_sansio.http",
    "mrtr_sansio.observe",
    "mrtr_sansio.adapters",
    "mrtr_sansio.adapters.stdio",
    "mrtr_sansio.adapters.anyio",
    "mrtr_sansio.adapters.asyncio",
    "mrtr_sansio.adapters.trio",
    "mrtr_sansio.adapters.asgi",
    "mrtr_sansio.adapters.http",
    "mrtr_sansio.adapters.stores",
    "mrtr_sansio.adapters.serve",
    "mrtr_sansio.otel",
    "mrtr_sansio.testing",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_errors_name_their_public_module(name: str) -> None:
    module = importlib.import_module(name)
    errors = 0
    for attr in module.__all__:
        value = getattr(module, attr)
        if isinstance(value, type) and issubclass(value, BaseException):
            errors += 1
            home = value.__module__
            assert "._" not in home, f"{name}.{attr}: {home}"
            assert getattr(importlib.import_module(home), value.__qualname__) is value
    if name == "mrtr_sansio.adapters":
        assert errors >= 6
        assert str(module.ConnectionClosedError) == (
            "<class 'mrtr_sansio.adapters.ConnectionClosedError'>"
        )
