#!/usr/bin/env python3
"""mdBook preprocessor: the course notebooks as pages of the book, with their committed outputs.

docs/book.toml runs it on every `mdbook build` (`make docs`, and tests/tooling/docs_book.rs in
`make test`). It reads notebooks/*.ipynb as committed (the outputs of their last headless run,
`make notebooks`) and adds one page per notebook under the book's "Notebooks" chapter:

- markdown cells as they are (a link to a picture beside the notebook, `figures/x.png`, becomes
  that picture, inline; a link into the book, `../docs/src/page.md`, leads to that page);
- code cells as Rust code blocks, marked `noplayground` (they need the kernel's `:dep` lines and
  the course's data, so mdBook's Rust playground cannot run them);
- the outputs under their cell: printed text as a text block, plots as inline PNGs (data URIs, so
  the built book holds them and no file is written next to the sources).

Nothing is written into docs/src: the pages exist only in the built book, so they always show the
notebooks as committed. Only Python's standard library is used, so the book builds with any
python3, without the project's venv (nbconvert, which would do the conversion, comes with
Jupyter, which `make docs` does not install).

Protocol (mdBook's preprocessor interface): `notebook_pages.py supports RENDERER` exits 0 for
every renderer; otherwise it reads `[context, book]` as JSON from stdin and writes the book back.
"""
import base64
import json
import os
import re
import sys

# The book's chapter under which the notebook pages go (docs/src/SUMMARY.md).
PARENT_PATH = "notebooks.md"
# Where the pages go in the built book: notebooks/NN-name.html.
PAGE_DIR = "notebooks"


def text_of(field):
    """A notebook field (a string, or a list of lines) as one string."""
    return "".join(field) if isinstance(field, list) else (field or "")


def fence(text, info):
    """`text` as a fenced code block with a fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}\n"


def png_uri(data):
    """A data URI for base64 PNG data as a notebook stores it (possibly with line breaks)."""
    return "data:image/png;base64," + "".join(data.split())


def inline_pictures(markdown, notebook_dir):
    """Markdown with links to local pictures (`![alt](figures/x.png)`) replaced by data URIs."""

    def replace(match):
        alt, target = match.group(1), match.group(2)
        if "://" in target or target.startswith("data:"):
            return match.group(0)
        path = os.path.normpath(os.path.join(notebook_dir, target))
        if not target.lower().endswith(".png") or not os.path.isfile(path):
            raise SystemExit(f"notebook_pages: {target} (linked from a notebook) is not a PNG file")
        with open(path, "rb") as f:
            return f"![{alt}](data:image/png;base64,{base64.b64encode(f.read()).decode()})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", replace, markdown)


def book_links(markdown):
    """Links from a notebook into the book (`../docs/src/page.md`) as links between book pages
    (the notebook pages are in the book's notebooks/ folder, one level below its pages)."""
    return markdown.replace("](../docs/src/", "](../")


def outputs_markdown(outputs):
    """A code cell's outputs: consecutive printed text in one block, each plot inline."""
    parts, printed = [], []

    def flush():
        if printed:
            parts.append(fence("".join(printed), "text"))
            printed.clear()

    for out in outputs:
        kind = out.get("output_type")
        data = out.get("data", {})
        if kind == "stream":
            printed.append(text_of(out.get("text")))
        elif "image/png" in data:
            flush()
            parts.append(f"![a figure the cell drew]({png_uri(text_of(data['image/png']))})\n")
        elif "text/plain" in data:
            printed.append(text_of(data["text/plain"]) + "\n")
        elif kind == "error":
            printed.append(f"{out.get('ename', 'error')}: {out.get('evalue', '')}\n")
    flush()
    return parts


def page(path):
    """(title, markdown) of the notebook at `path`."""
    with open(path, encoding="utf-8") as f:
        notebook = json.load(f)
    name = os.path.basename(path)
    title, parts = None, []
    for cell in notebook.get("cells", []):
        source = text_of(cell.get("source"))
        if cell.get("cell_type") == "markdown":
            if title is None:
                heading = re.search(r"^#\s+(.+)$", source, re.M)
                title = heading.group(1).strip() if heading else None
            parts.append(book_links(inline_pictures(source, os.path.dirname(path))) + "\n")
        elif cell.get("cell_type") == "code" and source.strip():
            parts.append(fence(source, "rust,noplayground"))
            parts.extend(outputs_markdown(cell.get("outputs", [])))
    title = title or name
    note = (
        f"*This page is `notebooks/{name}` as committed, with the outputs of its last run "
        "(`make notebooks`). Open the notebook itself to run it: "
        "[Notebooks](../notebooks.md).*\n"
    )
    if parts and parts[0].lstrip().startswith("# "):
        first, _, rest = parts[0].lstrip().partition("\n")
        parts[0] = f"{first}\n\n{note}{rest}"
    else:
        parts.insert(0, f"# {title}\n\n{note}")
    return title, "\n".join(parts)


def find_parent(items):
    """The chapter of PARENT_PATH among `items` (recursively), or None."""
    for item in items:
        chapter = item.get("Chapter") if isinstance(item, dict) else None
        if not chapter:
            continue
        if chapter.get("path") == PARENT_PATH:
            return chapter
        found = find_parent(chapter.get("sub_items", []))
        if found:
            return found
    return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        sys.exit(0)
    context, book = json.load(sys.stdin)
    notebooks = os.path.join(context["root"], "..", "notebooks")
    parent = find_parent(book.get("items", []))
    if parent is None:
        raise SystemExit(f"notebook_pages: the book has no chapter {PARENT_PATH}")
    names = sorted(n for n in os.listdir(notebooks) if n.endswith(".ipynb"))
    if not names:
        raise SystemExit(f"notebook_pages: no notebook in {notebooks}")
    number = parent.get("number") or []
    parents = parent.get("parent_names", []) + [parent["name"]]
    for i, name in enumerate(names, start=len(parent.get("sub_items", [])) + 1):
        title, content = page(os.path.join(notebooks, name))
        parent.setdefault("sub_items", []).append(
            {
                "Chapter": {
                    "name": title,
                    "content": content,
                    "number": number + [i] if number else None,
                    "sub_items": [],
                    "path": f"{PAGE_DIR}/{name[: -len('.ipynb')]}.md",
                    "source_path": None,
                    "parent_names": parents,
                }
            }
        )
    json.dump(book, sys.stdout)


if __name__ == "__main__":
    main()
