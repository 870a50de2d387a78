"""MkDocs hook: the built site must work opened from disk, with no network.

After the build it reads every page and fails the build when one loads anything from another
host (a ``<script src>``, stylesheet, font, image or frame with an ``http(s)`` address) or names
a CDN at all (the theme's Google Fonts, a mermaid from unpkg or jsDelivr), when a page has a
diagram but the site lacks the mermaid script it is drawn with, or when the search index is not
the script that the theme's offline plugin writes for ``file://``. Plain links to other sites
are fine: following one is the reader's choice.

Plain functions (no MkDocs import) so that ``tests/test_docs.py`` checks them without a docs
install; ``scripts/docs.sh`` vendors the mermaid script into ``docs/assets/vendor/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: Hosts that serve scripts, styles or fonts to other sites: none may appear in a page.
CDN_HOSTS = (
    "unpkg.com",
    "cdn.jsdelivr.net",
    "cdnjs.cloudflare.com",
    "fonts.googleapis.com",
    "fonts.gstatic.com",
    "polyfill.io",
    "esm.sh",
)
#: A resource the browser fetches by itself (not a link the reader follows).
REMOTE_RESOURCE = re.compile(
    r"<(?:script|img|iframe|source|embed)\b[^>]*\ssrc=[\"']?(?:https?:)?//"
    r"|<link\b[^>]*\shref=[\"']?(?:https?:)?//",
    re.IGNORECASE,
)
MERMAID_SCRIPT = Path("assets", "vendor", "mermaid.min.js")
WORKER_SHIM = Path("assets", "vendor", "iframe-worker-shim.js")
SEARCH_SCRIPT = Path("search", "search_index.js")


def on_post_build(config: Any, **_: Any) -> None:
    """Fail the build with every problem :func:`offline_problems` finds in the site."""
    problems = offline_problems(Path(config["site_dir"]))
    if problems:
        raise SystemExit("the site would not work offline:\n  " + "\n  ".join(problems))


#: After every plugin's post-build step (the offline plugin writes its search script at -100);
#: what MkDocs' ``event_priority`` decorator would set, without importing MkDocs.
on_post_build.mkdocs_priority = -200  # type: ignore[attr-defined]


def offline_problems(site: Path) -> list[str]:
    """What keeps the site at ``site`` from working from ``file://`` with no network."""
    problems = []
    has_diagram = False
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site).as_posix()
        html = page.read_text(encoding="utf-8")
        has_diagram = has_diagram or 'class="mermaid"' in html
        problems += [f"{name}: names the CDN {host}" for host in CDN_HOSTS if host in html]
        problems += [
            f"{name}: loads {match.group(0)!r}..." for match in REMOTE_RESOURCE.finditer(html)
        ]
    if has_diagram and not (site / MERMAID_SCRIPT).is_file():
        problems.append(f"pages have diagrams but {MERMAID_SCRIPT.as_posix()} is missing")
    if not (site / WORKER_SHIM).is_file():
        problems.append(f"{WORKER_SHIM.as_posix()} is missing: search needs it from file://")
    if not (site / SEARCH_SCRIPT).is_file():
        problems.append(f"{SEARCH_SCRIPT.as_posix()} is missing: search needs the offline plugin")
    return problems
