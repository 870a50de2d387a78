"""What a user installs: the distributions built from this tree, their metadata, and the
errors an optional part raises when its extra is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import mrtr_sansio
from mrtr_sansio._extras import EXTRAS, raise_missing_extra

ROOT = Path(__file__).resolve().parents[1]
DIST = "mrtr-sansio"
#: The optional parts, a module each imports, and the extra that installs it.
OPTIONAL_PARTS = [
    ("mrtr_sansio.adapters.asgi", "anyio", "server"),
    ("mrtr_sansio.adapters.http", "httpx", "http"),
    ("mrtr_sansio.adapters.http", "anyio", "http"),
    ("mrtr_sansio.adapters.anyio", "anyio", "anyio"),
    ("mrtr_sansio.adapters.asyncio", "anyio", "anyio"),
    ("mrtr_sansio.adapters.trio", "trio", "trio"),
    ("mrtr_sansio.adapters.trio", "anyio", "trio"),
    ("mrtr_sansio.testing", "hypothesis", "testing"),
    ("mrtr_sansio.testing.strategies", "hypothesis", "testing"),
]


def _import_without(module: str, blocked: str) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter where ``blocked`` cannot be imported."""
    code = f"import sys; sys.modules[{blocked!r}] = None; import {module}"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(("module", "blocked", "extra"), OPTIONAL_PARTS)
def test_an_optional_part_without_its_extra_names_the_extra(
    module: str, blocked: str, extra: str
) -> None:
    run = _import_without(module, blocked)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    part = module.rsplit(".strategies", 1)[0]  # the package's guard speaks for its modules
    assert last == (
        f"ModuleNotFoundError: {part} needs {blocked}: pip install 'mrtr-sansio[{extra}]'"
    )


# (anyio itself needs typing-extensions, so the async adapters are not in this list)
@pytest.mark.parametrize("module", ["mrtr_sansio", "mrtr_sansio.adapters.stdio"])
def test_the_core_and_the_stdlib_adapter_import_without_typing_extensions(module: str) -> None:
    run = _import_without(module, "typing_extensions")
    assert run.returncode == 0, run.stderr


def test_the_missing_extra_error_names_part_module_and_extra() -> None:
    missing = ModuleNotFoundError("No module named 'httpx'", name="httpx")
    with pytest.raises(ModuleNotFoundError) as caught:
        raise_missing_extra(missing, "the part", "http")
    assert str(caught.value) == "the part needs httpx: pip install 'mrtr-sansio[http]'"
    assert caught.value.name == "httpx"
    assert caught.value.__cause__ is missing


def test_an_import_error_the_extra_does_not_cover_is_raised_unchanged() -> None:
    broken = ModuleNotFoundError("No module named 'sniffio'", name="sniffio")
    with pytest.raises(ModuleNotFoundError) as caught:
        raise_missing_extra(broken, "the part", "http")
    assert caught.value is broken


def _requirements() -> list[tuple[str, str | None]]:
    """(distribution name, extra or None) for each requirement in the installed metadata."""
    out = []
    for line in metadata.requires(DIST) or []:
        name = re.match(r"[A-Za-z0-9._-]+", line)
        assert name is not None
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", line)
        out.append((name.group(0).lower(), extra.group(1) if extra else None))
    return out


#: Distributions whose top-level module has another name.
_MODULE_OF = {"opentelemetry-api": "opentelemetry", "pydocket": "docket"}


def test_the_extras_table_matches_the_published_extras() -> None:
    published: dict[str, set[str]] = {}
    for name, extra in _requirements():
        if extra is not None:
            published.setdefault(extra, set()).add(_MODULE_OF.get(name, name))
    assert published == {extra: set(modules) for extra, modules in EXTRAS.items()}


def test_users_get_attrs_only_and_no_development_pins() -> None:
    assert [name for name, extra in _requirements() if extra is None] == ["attrs"]
    assert not [r for r in metadata.requires(DIST) or [] if "==" in r.partition(";")[0]]
    assert set(metadata.metadata(DIST).get_all("Provides-Extra") or []) == set(EXTRAS)


def test_the_version_is_written_once() -> None:
    assert metadata.version(DIST) == mrtr_sansio.__version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^version\s*=", pyproject, re.MULTILINE) is None
    assert 'dynamic = ["version"]' in pyproject


def _build(kind: str, out: Path) -> Path:
    """Build the wheel or the sdist from this tree with hatchling, without a package index."""
    code = f"import sys; from hatchling.build import build_{kind}; print(build_{kind}(sys.argv[1]))"
    run = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out / run.stdout.strip().splitlines()[-1]


def test_the_wheel_carries_the_license_and_honest_metadata(tmp_path: Path) -> None:
    wheel = _build("wheel", tmp_path)
    assert wheel.name == f"mrtr_sansio-{mrtr_sansio.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        info = f"mrtr_sansio-{mrtr_sansio.__version__}.dist-info"
        license_text = archive.read(f"{info}/licenses/LICENSE").decode()
        meta = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    # the testing kit's command ships in the wheel (issue 20: it was an example script)
    assert entry_points.startswith("[console_scripts]\n")
    assert "\nmrtr-check = mrtr_sansio.testing.cli:main\n" in entry_points
    assert "\nmrtr-bridge = mrtr_sansio.adapters.bridge:main\n" in entry_points  # issue 29
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Copyright (c) 2026 the mrtr_sansio authors" in license_text
    assert "License-Expression: MIT" in meta
    assert "License-File: LICENSE" in meta
    for minor in (10, 11, 12, 13):
        assert f"Classifier: Programming Language :: Python :: 3.{minor}\n" in meta
    assert "Classifier: Development Status :: " in meta
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.MULTILINE))
    assert extras == set(EXTRAS)
    assert not [r for r in re.findall(r"^Requires-Dist: ([^;]*)", meta, re.MULTILINE) if "==" in r]


def test_the_sdist_carries_the_license(tmp_path: Path) -> None:
    sdist = _build("sdist", tmp_path)
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    top = f"mrtr_sansio-{mrtr_sansio.__version__}"
    assert f"{top}/LICENSE" in names
    assert f"{top}/src/mrtr_sansio/__init__.py" in names
    assert not [n for n in names if n.startswith((f"{top}/site/", f"{top}/.venv"))]


def test_the_redis_task_store_without_its_extra_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from mrtr_sansio.adapters.stores import RedisTaskStore\n"
        "RedisTaskStore.from_url('redis://127.0.0.1:9')"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: RedisTaskStore needs redis: pip install 'mrtr-sansio[tasks-redis]'"
    )


#: What the sdist holds at its top, besides PKG-INFO: the tree as git tracks it.
SDIST_TOP = {
    ".ci",
    ".gitignore",
    "CHANGELOG.md",
    "LICENSE",
    "README.md",
    "bench",
    "docs",
    "examples",
    "fuzz",
    "mkdocs.yml",
    "pyproject.toml",
    "scripts",
    "src",
    "tests",
}
#: What the wheel's metadata directory holds.
DIST_INFO = {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "licenses/LICENSE"}


def _tracked() -> list[str]:
    """The files git tracks in this tree (the tests skip outside a git checkout)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: what ships is defined by the tracked files")
    run = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    )
    return [name for name in run.stdout.decode().split("\0") if name and (ROOT / name).exists()]


def test_the_package_sources_are_python_files_only() -> None:
    package = [n for n in _tracked() if n.startswith("src/")]
    strays = [n for n in package if not n.endswith(".py") and n != "src/mrtr_sansio/py.typed"]
    assert strays == []  # a leftover (an .orig, a .rej, a data file) would ship in the wheel


def test_the_wheel_holds_exactly_the_package_and_its_metadata(tmp_path: Path) -> None:
    package = {n.removeprefix("src/") for n in _tracked() if n.startswith("src/mrtr_sansio/")}
    wheel = _build("wheel", tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    info = f"mrtr_sansio-{mrtr_sansio.__version__}.dist-info"
    assert names == package | {f"{info}/{name}" for name in DIST_INFO}


def test_the_sdist_holds_exactly_the_tracked_tree(tmp_path: Path) -> None:
    tracked = _tracked()
    sdist = _build("sdist", tmp_path)
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    top = f"mrtr_sansio-{mrtr_sansio.__version__}"
    assert names == {f"{top}/{name}" for name in tracked} | {f"{top}/PKG-INFO"}
    assert {name.split("/", 1)[0] for name in tracked} == SDIST_TOP
