"""A real browser for the report's tests: Debian's chromium, headless, given a file and a time
budget for its scripts, returning the DOM they left (`--dump-dom`), parsed into a small tree."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--hide-scrollbars"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="no chromium on this machine (apt-get install chromium; .ci/run installs it): the report is tested in a real browser"
)


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Every node below with this tag and these attributes (`class_` for class; a class matches one of the element's)."""
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and all(_has(c, k.rstrip("_"), v) for k, v in attrs.items()):
                    found.append(c)
                found += c.all(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag} {attrs}> found"
        return found[0]

    def rows(self) -> list[list[str]]:
        """A table's cells, row by row, as text."""
        return [[" ".join(td.text.split()) for td in tr.all() if td.tag in ("td", "th") and td.parent is tr] for tr in self.all("tr")]


def _has(node: Node, key: str, value: str) -> bool:
    if key == "class":
        return value in node.attrs.get("class", "").split()
    return node.attrs.get(key) == value


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.at = Node("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag: str) -> None:
        at: Node | None = self.at
        while at is not None and at.tag != tag:
            at = at.parent
        if at is not None and at.parent is not None:
            self.at = at.parent

    def handle_data(self, data: str) -> None:
        self.at.children.append(data)


def parse(html: str) -> Node:
    tree = _Tree()
    tree.feed(html)
    return tree.root


def dump_dom(page: Path, fragment: str = "", budget_ms: int = 10_000, timeout: float = 90.0) -> Node:
    """The DOM of `page` (a file; `fragment`: after the #) once its scripts ran, within `budget_ms`
    of the page's own (virtual) time."""
    with tempfile.TemporaryDirectory() as profile:
        url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                              capture_output=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return parse(done.stdout.decode())


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 1600, timeout: float = 90.0) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000", f"--window-size={width},{height}",
                        f"--screenshot={out}", page.resolve().as_uri()], capture_output=True, timeout=timeout, check=True)
