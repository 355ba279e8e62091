"""Every document the repository cites exists, and every Markdown link
resolves.

- A path ``docs/...`` or ``.../README.md`` written anywhere in a tracked
  file (code comments, scripts, CMake, docs, the README) names a tracked
  file or directory of the repository.
- A citation ``docs/FILE.md, "Section"`` names a heading of that file (a
  heading that starts with the quoted words).
- A relative link or image ``[text](target)`` or ``[text](target#anchor)``
  in a tracked Markdown file names a tracked file or directory, relative
  to the linking file, and the anchor names one of its headings.

Run from CMake as lint.doc_citations; by hand: ``python3 -m pytest -q
tests/unit/doc_citations_test.py``.
"""

import os
import pathlib
import re
import subprocess

import pytest

# A path from the repository's top: docs/... or a README.md, not inside a
# longer path (../docs/x.md is a relative link, handled as a link).
CITED_PATH = re.compile(
    r"(?<![\w./-])(?:docs/[\w.-]+(?:/[\w.-]+)*|(?:\w[\w.-]*/)*README\.md)")
# What may follow a cited path: the rest of a Markdown link, then
# ', "Section"' (the section is checked, over line breaks).
SECTION = re.compile(r'^(?:\]\([^)]*\))?, "([^"]+)"')
# A citation of a file as it was at a commit is not checked.
AT_COMMIT = re.compile(r"^`? at [0-9a-f]{7,40}\b")
# Where a cited section wraps onto the next line of a comment.
LINE_BREAK = re.compile(r"\s*\n\s*(?://+|/?\*+|#+|--)?\s*")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?"
                  r"(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# This file cites missing documents on purpose (the tests of the checks).
SELF = "tests/unit/doc_citations_test.py"


def repository_top():
    top = os.environ.get("DCACHE_SOURCE_DIR")
    if top:
        return pathlib.Path(top)
    return pathlib.Path(__file__).resolve().parents[2]


def tracked_files(top):
    """The repository's files, as git has them (new files included)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(top), "ls-files", "-z", "--cached",
             "--others", "--exclude-standard"],
            check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"{top} is not a git checkout ({e}): nothing to list")
    return sorted(set(p for p in out.decode().split("\0") if p))


class Tree:
    """The tracked files of a repository and what their text says."""

    def __init__(self, top, files):
        self.top = pathlib.Path(top)
        self.files = set(files)
        self.dirs = set()
        for f in self.files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        self._text = {}
        self._anchors = {}

    def exists(self, path):
        path = path.rstrip("/")
        return path in self.files or path in self.dirs or path == ""

    def text(self, path):
        if path not in self._text:
            try:
                data = (self.top / path).read_bytes()
                self._text[path] = (None if b"\0" in data
                                    else data.decode("utf-8"))
            except (OSError, UnicodeDecodeError):
                self._text[path] = None
        return self._text[path]

    def headings(self, path):
        """The Markdown file's headings, as written and as anchors."""
        if path not in self._anchors:
            titles, anchors, seen = [], set(), {}
            fenced = False
            for line in (self.text(path) or "").splitlines():
                if FENCE.match(line):
                    fenced = not fenced
                m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*$",
                                                 line)
                if not m:
                    continue
                title = m.group(1).replace("`", "")
                titles.append(" ".join(title.split()))
                slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                anchors.add(slug if n == 0 else f"{slug}-{n}")
            self._anchors[path] = (titles, anchors)
        return self._anchors[path]


def cited_paths(tree):
    """(file, line, path, section or None) for every path cited."""
    found = []
    for f in sorted(tree.files - {SELF}):
        text = tree.text(f)
        if text is None:
            continue
        for m in CITED_PATH.finditer(text):
            if text[max(0, m.start() - 2):m.start()] == "](":
                continue  # a link's target, relative to its file: below
            path = m.group(0).rstrip(".")
            after = text[m.end():m.end() + 300]
            if AT_COMMIT.match(after):
                continue
            section = SECTION.match(LINE_BREAK.sub(" ", after))
            line = text.count("\n", 0, m.start()) + 1
            found.append((f, line, path,
                          " ".join(section.group(1).lstrip("# ").split())
                          if section else None))
    return found


def markdown_links(tree):
    """(file, line, target) for every link of every tracked .md file."""
    found = []
    for f in sorted(tree.files):
        if not f.endswith(".md") or tree.text(f) is None:
            continue
        fenced = False
        for n, line in enumerate(tree.text(f).splitlines(), 1):
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            line = INLINE_CODE.sub("", line)
            targets = [m.group(1) for m in LINK.finditer(line)]
            ref = REFERENCE_LINK.match(line)
            if ref:
                targets.append(ref.group(1))
            found += [(f, n, t) for t in targets if not SCHEME.match(t)]
    return found


def broken_citations(tree):
    problems = []
    for f, line, path, section in cited_paths(tree):
        if not tree.exists(path):
            problems.append(f"{f}:{line}: {path} is not in the repository")
        elif section and path.endswith(".md"):
            titles, _ = tree.headings(path)
            if not any(t.startswith(section) for t in titles):
                problems.append(f'{f}:{line}: {path} has no section '
                                f'"{section}"')
    return problems


def broken_links(tree):
    problems = []
    for f, line, target in markdown_links(tree):
        path, _, anchor = target.partition("#")
        if path:
            resolved = os.path.normpath(
                os.path.join(os.path.dirname(f), path))
            if resolved.startswith(".."):
                problems.append(f"{f}:{line}: {target} leaves the "
                                "repository")
                continue
            if not tree.exists(resolved):
                problems.append(f"{f}:{line}: {target} does not exist")
                continue
        else:
            resolved = f
        if anchor and resolved.endswith(".md"):
            _, anchors = tree.headings(resolved)
            if anchor not in anchors:
                problems.append(f"{f}:{line}: {target}: {resolved} has no "
                                f"heading #{anchor}")
    return problems


@pytest.fixture(scope="module")
def repository():
    top = repository_top()
    return Tree(top, tracked_files(top))


def test_every_cited_document_exists(repository):
    problems = broken_citations(repository)
    assert not problems, "\n" + "\n".join(problems)


def test_every_markdown_link_resolves(repository):
    problems = broken_links(repository)
    assert not problems, "\n" + "\n".join(problems)


def test_the_checks_see_what_they_check(repository):
    cited = {(f, p) for f, _, p, _ in cited_paths(repository)}
    assert ("fsal_dcache/core/settings.cpp",
            "docs/results/2026-11-30-baseline.md") in cited
    linked = {(f, t) for f, _, t in markdown_links(repository)}
    assert ("README.md", "docs/benchmarks.md") in {
        (f, t.partition("#")[0]) for f, t in linked}


def make_tree(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return Tree(tmp_path, files)


def test_a_broken_citation_fails(tmp_path):
    tree = make_tree(tmp_path, {
        "docs/a.md": "# A\n\n## Memory under load (2026-12-01)\n",
        "src/x.cpp": ("// measured (docs/a.md, \"Memory under\n"
                      "// load\"), docs/gone.md\n"
                      "// docs/a.md, \"Nowhere\"; docs/gone.md at 1234567\n"),
        "tools/y.sh": "# see tests/e2e/README.md and README.md\n",
    })
    assert broken_citations(tree) == [
        "src/x.cpp:2: docs/gone.md is not in the repository",
        'src/x.cpp:3: docs/a.md has no section "Nowhere"',
        "tools/y.sh:1: tests/e2e/README.md is not in the repository",
        "tools/y.sh:1: README.md is not in the repository",
    ]


def test_a_broken_link_fails(tmp_path):
    tree = make_tree(tmp_path, {
        "README.md": ("[ok](docs/a.md#how-to-read-this-noise) "
                      "[no](docs/b.md) ![img](docs/c.png)\n"
                      "`[code](not/checked.md)` [web](https://example.org)\n"
                      "```\n[fenced](not/checked.md)\n```\n"),
        "docs/a.md": ("# How to read this (noise)\n\n"
                      "[up](../README.md) [here](#nowhere) "
                      "[out](../../x.md)\n"),
    })
    assert broken_links(tree) == [
        "README.md:1: docs/b.md does not exist",
        "README.md:1: docs/c.png does not exist",
        "docs/a.md:3: #nowhere: docs/a.md has no heading #nowhere",
        "docs/a.md:3: ../../x.md leaves the repository",
    ]
