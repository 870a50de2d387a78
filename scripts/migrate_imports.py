"""Rewrite imports of mrtr_sansio to the small front door (0.1 -> 0.2 layout).

    python scripts/migrate_imports.py FILE_OR_DIR ...      rewrite in place (.py and .md files)
    python scripts/migrate_imports.py --check FILE ...     exit 1 if something would change
    python scripts/migrate_imports.py --table              print the migration table (Markdown)

What it rewrites, and nothing else:

* ``from mrtr_sansio import A, B`` (and ``from .. import A`` inside the package): names that
  left the front door are imported from their new public module (:data:`MOVED`);
* imports of the private modules that moved into ``sealing/`` and ``http/`` (:data:`MODULES`),
  absolute or relative;
* the error-code constants (``INVALID_PARAMS``, ...) imported from ``mrtr_sansio`` or its
  ``_errors`` module become ``ErrorCode`` members, in the import and at each bare use;
* ``mrtr_sansio.A`` / ``m.A`` attribute uses after ``import mrtr_sansio [as m]``, and Markdown
  cross-references ``[A][mrtr_sansio.A]``;
* ``x.send(Respond(...))`` -> ``x.respond(...)`` and ``x.send(Notify(...))`` -> ``x.notify(...)``,
  with ``Respond`` / ``Notify`` dropped from the imports.

Running it twice changes nothing the second time; a file that says ``migrate_imports: skip``
is left alone. It sorts the names it writes, but not the
statements: run ``ruff check --select I --fix`` and ``ruff format`` on Python files afterwards.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

#: Every name that left ``mrtr_sansio.__all__``: old ``mrtr_sansio.NAME`` -> its public home.
MOVED: dict[str, str] = {
    # sealed requestState
    "REQUEST_STATE_REASONS": "mrtr_sansio.sealing",
    "AesGcmCodec": "mrtr_sansio.sealing",
    "HmacSha256Codec": "mrtr_sansio.sealing",
    "MemoryReplayGuard": "mrtr_sansio.sealing",
    "ReplayGuard": "mrtr_sansio.sealing",
    "RequestStateError": "mrtr_sansio.sealing",
    "RequestStateSecurity": "mrtr_sansio.sealing",
    "StateBinding": "mrtr_sansio.sealing",
    "StateCodec": "mrtr_sansio.sealing",
    "StateProtector": "mrtr_sansio.sealing",
    "SwappableStateProtector": "mrtr_sansio.sealing",
    "Unsealed": "mrtr_sansio.sealing",
    "UnsealedState": "mrtr_sansio.sealing",
    "process_state_protector": "mrtr_sansio.sealing",
    # IO-free Streamable HTTP rules
    "HttpRequestFacts": "mrtr_sansio.http",
    "decode_header_value": "mrtr_sansio.http",
    "encode_header_value": "mrtr_sansio.http",
    "mirrored_params": "mrtr_sansio.http",
    "param_headers_for": "mrtr_sansio.http",
    # events, and what outgoing() returns
    "FulfilRequest": "mrtr_sansio.events",
    "OutgoingError": "mrtr_sansio.events",
    "OutgoingInputRequired": "mrtr_sansio.events",
    "OutgoingNotification": "mrtr_sansio.events",
    "OutgoingRequest": "mrtr_sansio.events",
    "OutgoingResult": "mrtr_sansio.events",
    # JSON codecs
    "JsonCodec": "mrtr_sansio.config",
    "OrjsonCodec": "mrtr_sansio.config",
    "StdlibJsonCodec": "mrtr_sansio.config",
    "default_codec": "mrtr_sansio.config",
    # protocol facts: versions, the envelope, method facts, capabilities, legacy sessions
    "CLIENT_CAPABILITIES": "mrtr_sansio.protocol",
    "CLIENT_INFO": "mrtr_sansio.protocol",
    "EMBEDDABLE_METHODS": "mrtr_sansio.protocol",
    "LATEST_LEGACY_VERSION": "mrtr_sansio.protocol",
    "LATEST_MODERN_VERSION": "mrtr_sansio.protocol",
    "LEGACY_VERSIONS": "mrtr_sansio.protocol",
    "LOG_LEVEL": "mrtr_sansio.protocol",
    "MODERN_VERSIONS": "mrtr_sansio.protocol",
    "MRTR_METHODS": "mrtr_sansio.protocol",
    "PROTOCOL_VERSION": "mrtr_sansio.protocol",
    "SERVER_INFO": "mrtr_sansio.protocol",
    "SUBSCRIPTION_ID": "mrtr_sansio.protocol",
    "LegacySession": "mrtr_sansio.protocol",
    "merge_capabilities": "mrtr_sansio.protocol",
    "missing_capabilities": "mrtr_sansio.protocol",
    "modern_envelope": "mrtr_sansio.protocol",
    "required_capabilities": "mrtr_sansio.protocol",
}

#: The module-level error-code constants, now members of ``ErrorCode`` of the same name.
ERROR_CODES: tuple[str, ...] = (
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
)

#: Command classes removed: the one way to do the act now.
REMOVED: dict[str, str] = {
    "Respond": "conn.respond(request_id, result)",
    "Notify": "conn.notify(method, params, related_request_id)",
}

#: Private modules that moved into the public packages (their names stay private).
MODULES: dict[str, str] = {
    "mrtr_sansio._sealing": "mrtr_sansio.sealing._security",
    "mrtr_sansio._sealing_codecs": "mrtr_sansio.sealing._codecs",
    "mrtr_sansio._sealing_replay": "mrtr_sansio.sealing._replay",
    "mrtr_sansio._state": "mrtr_sansio.sealing._state",
    "mrtr_sansio._state_swap": "mrtr_sansio.sealing._swap",
    "mrtr_sansio._http": "mrtr_sansio.http._facts",
    "mrtr_sansio._param_headers": "mrtr_sansio.http._param_headers",
}

FRONT = "mrtr_sansio"
#: Modules whose error-code constants become ``ErrorCode`` (imported from the same module).
_CODE_MODULES = {FRONT, "mrtr_sansio._errors", "mrtr_sansio.errors"}
_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from[ \t]+(?P<mod>\.+[\w.]*|mrtr_sansio(?:\.[\w.]+)?)[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)|[^\n]*)",
    re.M,
)
_PLAIN_IMPORT = re.compile(r"^[ \t]*import[ \t]+mrtr_sansio(?:[ \t]+as[ \t]+(\w+))?[ \t]*$", re.M)
_COMMAND = re.compile(r"\.send\(\s*(Respond|Notify)\(")
_WIDTH = 100


def table() -> str:
    """The migration table as Markdown: old name, new import."""
    rows = ["| 0.1 (`from mrtr_sansio import ...`) | now |", "| --- | --- |"]
    for name, home in sorted(MOVED.items(), key=lambda item: (item[1], item[0].lower())):
        rows.append(f"| `{name}` | `from {home} import {name}` |")
    for name in ERROR_CODES:
        rows.append(f"| `{name}` | `ErrorCode.{name}` (`from mrtr_sansio import ErrorCode`) |")
    for name, use in REMOVED.items():
        rows.append(f"| `{name}` and `conn.send({name}(...))` | `{use}` |")
    for old, new in MODULES.items():
        rows.append(f"| private `{old}` | private `{new}` |")
    return "\n".join(rows) + "\n"


def _package_of(path: Path) -> list[str] | None:
    """The dotted package a file inside ``mrtr_sansio`` belongs to (for relative imports)."""
    parts = list(path.resolve().with_suffix("").parts)
    if "mrtr_sansio" not in parts[:-1]:
        return None
    start = len(parts) - 1 - parts[::-1].index("mrtr_sansio")
    return parts[start:-1]


def _resolve(module: str, package: list[str] | None) -> str | None:
    if not module.startswith("."):
        return module
    if package is None:
        return None
    level = len(module) - len(module.lstrip("."))
    base = package[: len(package) - (level - 1)] if level > 1 else package
    rest = module[level:]
    return ".".join([*base, *([rest] if rest else [])])


def _relative(target: str, package: list[str]) -> str:
    """``target`` as seen from ``package``: relative within it, absolute above it (ruff TID252)."""
    parts = target.split(".")
    common = 0
    while common < min(len(parts), len(package)) and parts[common] == package[common]:
        common += 1
    if common < len(package):
        return target
    return "." + ".".join(parts[common:])


def _sort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, Classes, functions."""
    bare = name.split(" as ", maxsplit=1)[0]
    kind = 0 if bare.isupper() and len(bare) > 1 else 1 if bare[:1].isupper() else 2
    return kind, bare


def _statement(indent: str, module: str, names: list[str]) -> str:
    names = sorted(dict.fromkeys(names), key=_sort_key)
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= _WIDTH:
        return line
    body = "".join(f"{indent}    {name},\n" for name in names)
    return f"{indent}from {module} import (\n{body}{indent})"


def _matching(text: str, opening: int) -> int:
    """The index of the parenthesis closing the one at ``opening`` (strings skipped)."""
    depth, i, quote = 0, opening, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "\"'":
            quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":
            i = text.find("\n", i)
            if i < 0:
                break
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced parentheses")


def _commands(text: str) -> str:
    """``x.send(Respond(a, b))`` -> ``x.respond(a, b)``; likewise ``Notify`` -> ``notify``."""
    while match := _COMMAND.search(text):
        inner_open = match.end() - 1
        inner_close = _matching(text, inner_open)
        outer_close = _matching(text, match.start() + len(".send"))
        between = text[inner_close + 1 : outer_close]
        if between.strip() not in ("", ","):
            raise ValueError(f"send() with more than one argument at offset {match.start()}")
        method = "respond" if match.group(1) == "Respond" else "notify"
        text = (
            text[: match.start()]
            + f".{method}("
            + text[inner_open + 1 : inner_close]
            + ")"
            + text[outer_close + 1 :]
        )
    return text


def _imports(text: str, package: list[str] | None) -> tuple[str, dict[str, str]]:
    """Rewrite the import statements; returns the text and the bare constant uses to rename."""
    constants: dict[str, str] = {}  # bound name -> ErrorCode.MEMBER
    already = set(re.findall(r"\bimport[^\n]*\bErrorCode\b|^\s+ErrorCode,", text, re.M))
    has_code = bool(already)

    def rewrite(match: re.Match[str]) -> str:
        nonlocal has_code
        raw_module, names_src = match.group("mod"), match.group("names")
        module = _resolve(raw_module, package)
        if module is None or not (module == FRONT or module.startswith(FRONT + ".")):
            return match.group(0)
        names_body = names_src.strip()
        if names_body.startswith("("):
            names_body = names_body[1:-1]
        if "#" in names_body or "\\" in names_body or names_body.strip() == "*":
            return match.group(0)  # leave commented or starred imports to a person
        names = [n.strip() for n in names_body.replace("\n", " ").split(",") if n.strip()]
        new_module = MODULES.get(module, module)
        groups: dict[str, list[str]] = {new_module: []}
        for name in names:
            bare, _, alias = name.partition(" as ")
            bare, alias = bare.strip(), alias.strip()
            if bare in REMOVED and new_module in (FRONT, "mrtr_sansio._events"):
                continue
            if bare in ERROR_CODES and new_module in _CODE_MODULES:
                constants[alias or bare] = f"ErrorCode.{bare}"
                if not has_code:
                    groups[new_module].append("ErrorCode")
                    has_code = True
                continue
            home = MOVED.get(bare) if new_module == FRONT else None
            groups.setdefault(home or new_module, []).append(name)
        if new_module == module and groups[module] == names and len(groups) == 1:
            return match.group(0)
        indent = match.group("indent")
        relative = raw_module.startswith(".") and package is not None
        out = []
        for target, members in groups.items():
            if members:
                shown = _relative(target, package) if relative and package else target
                out.append(_statement(indent, shown, members))
        return "\n".join(out) if out else f"{indent}pass" if indent else ""

    new = _IMPORT.sub(rewrite, text)
    new = re.sub(r"\n\n\n\n+", "\n\n\n", new)
    return new, constants


def _attributes(text: str) -> str:
    """``m.NAME`` after ``import mrtr_sansio as m`` (or ``mrtr_sansio.NAME``) -> the new home."""
    aliases = {alias or "mrtr_sansio" for alias in _PLAIN_IMPORT.findall(text)}
    for alias in aliases:
        for name, home in MOVED.items():
            sub = home[len(FRONT) + 1 :]
            text = re.sub(rf"(?<![\w.]){alias}\.{name}\b", f"{alias}.{sub}.{name}", text)
        for name in ERROR_CODES:
            text = re.sub(rf"(?<![\w.]){alias}\.{name}\b", f"{alias}.ErrorCode.{name}", text)
    return text


def _references(text: str) -> str:
    """Markdown cross-references ``[text][mrtr_sansio.NAME]`` -> the name's new home."""
    for name, home in MOVED.items():
        text = re.sub(rf"\]\[mrtr_sansio\.{name}(?=[\].])", f"][{home}.{name}", text)
    for name in ERROR_CODES:
        text = re.sub(rf"\]\[mrtr_sansio\.{name}(?=\])", f"][mrtr_sansio.ErrorCode.{name}", text)
    return text


#: A file that holds this string is left as it is (the migration table shows the old names).
SKIP = "migrate_imports: skip"


def migrate(text: str, path: Path | None = None) -> str:
    """The rewritten text of one file (``path`` places its relative imports)."""
    if SKIP in text:
        return text
    package = _package_of(path) if path is not None and path.suffix == ".py" else None
    if path is not None and path.suffix == ".md":
        text = _references(text)
    text = _commands(text)
    text, constants = _imports(text, package)
    if constants:
        spans = [(m.start(), m.end()) for m in _IMPORT.finditer(text)]
        pattern = re.compile(r"(?<![\w.'\"])(" + "|".join(map(re.escape, constants)) + r")\b")

        def use(match: re.Match[str]) -> str:
            inside = any(a <= match.start() < b for a, b in spans)
            return match.group(0) if inside else constants[match.group(1)]

        text = pattern.sub(use, text)
    return _attributes(text)


#: Directories of other people's files (venvs, npm packages): never rewritten.
_SKIPPED = frozenset({".venv", "node_modules"})


def files(paths: list[str]) -> Iterator[Path]:
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for suffix in ("*.py", "*.md"):
                found = path.rglob(suffix)
                yield from sorted(p for p in found if _SKIPPED.isdisjoint(p.parts))
        else:
            yield path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    parser.add_argument("--table", action="store_true", help="print the migration table")
    args = parser.parse_args(argv)
    if args.table:
        sys.stdout.write(table())
        return 0
    changed = 0
    for path in files(args.paths):
        old = path.read_text(encoding="utf-8")
        new = migrate(old, path)
        if new != old:
            changed += 1
            print(f"{'would rewrite' if args.check else 'rewrote'} {path}")
            if not args.check:
                path.write_text(new, encoding="utf-8")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
