#!/usr/bin/env python3
"""Checks the user guide's links: every relative link in README.md and docs/*.md names a file
or folder of the repository, every #anchor names a heading (or an <a id>) of its page as GitHub
renders it, and every page of docs/ is linked from README.md, so none is out of reach.

    docs_links_test.py SOURCE_DIR

Exits 1 listing each broken link as FILE:LINE: [text](target): why.
"""
import os
import re
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for _, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def check(source_dir, page, anchor_cache):
    problems, targets = [], set()
    with open(page, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            label, target = match.group(1), match.group(2)
            where = f"{os.path.relpath(page, source_dir)}:{number}: [{label}]({target})"
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(resolved):
                problems.append(f"{where}: no such file or folder {os.path.relpath(resolved, source_dir)}")
                continue
            if not os.path.realpath(resolved).startswith(os.path.realpath(source_dir)):
                problems.append(f"{where}: leaves the repository")
                continue
            targets.add(os.path.realpath(resolved))
            if anchor:
                if not resolved.endswith(".md"):
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                    continue
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors(resolved)
                if anchor not in anchor_cache[resolved]:
                    problems.append(f"{where}: {os.path.relpath(resolved, source_dir)} has no "
                                    f"heading with the anchor #{anchor}")
    return problems, targets


def main():
    source_dir = os.path.realpath(sys.argv[1])
    docs = os.path.join(source_dir, "docs")
    readme = os.path.join(source_dir, "README.md")
    pages = [readme] + sorted(os.path.join(docs, name) for name in os.listdir(docs)
                              if name.endswith(".md"))
    problems, anchor_cache, links = [], {}, 0
    readme_targets = set()
    for page in pages:
        page_problems, targets = check(source_dir, page, anchor_cache)
        problems += page_problems
        links += len(targets)
        if page == readme:
            readme_targets = targets
    for page in pages[1:]:
        if os.path.realpath(page) not in readme_targets:
            problems.append(f"README.md: links to no {os.path.relpath(page, source_dir)}: "
                            "list it under the guide's pages")
    if links < len(pages):
        problems.append(f"only {links} link targets in {len(pages)} pages: is the link pattern broken?")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} broken link(s) in README.md and docs/")
        return 1
    print(f"{len(pages)} pages, every relative link and anchor resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
