"""The report's document model: a list of blocks rendered twice, to Markdown (``REPORT.md``) and
to one self-contained HTML page (``report.html``: inline CSS, images as base64 data URIs).

Blocks: :class:`Heading`, :class:`Paragraph`, :class:`Table`, :class:`Image`, :class:`BulletList`
and :class:`Raw` (pre-rendered Markdown and HTML). Text in a paragraph, a table cell or a list
item is a plain string, a :class:`Bold` or :class:`Code` span, or a list of those; strings are
escaped for HTML, never interpreted. A domain section builds the same blocks as the report and
hands them back with :meth:`benchmarks.report.ExtraSection.from_blocks`, so that its tables look
like every other table of the report.
"""

from __future__ import annotations

import base64
import html as _html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, Union

from tasks.common.io import write_atomic

__all__ = [
    "Bold", "Code", "Inline", "Heading", "Paragraph", "Table", "Image", "BulletList", "Raw", "Block",
    "render_markdown", "render_html", "render_html_fragment", "embed_png", "write_text_atomic",
]


@dataclass(frozen=True)
class Bold:
    """Strong text: ``**text**`` in Markdown, ``<b>`` in HTML."""

    text: str


@dataclass(frozen=True)
class Code:
    """A name set as code: ```text``` in Markdown, ``<code>`` in HTML."""

    text: str


#: Text of a paragraph, cell or list item: a string, a span, or a sequence of them.
Inline = Union[str, Bold, Code, Sequence[Any]]


@dataclass
class Heading:
    level: int
    text: str
    anchor: str | None = None  # the HTML id


@dataclass
class Paragraph:
    text: Inline
    cls: str | None = None  # HTML class: "note" (small print) or "warn" (highlighted)


@dataclass
class Table:
    headers: list[str]
    rows: list[list[Inline]]


@dataclass
class Image:
    path: Path  # absolute: embedded in the HTML
    rel: str  # relative to the report's folder, for Markdown
    alt: str

    @classmethod
    def of(cls, path: str | os.PathLike, out_dir: str | os.PathLike, alt: str) -> "Image":
        """The block showing the PNG at ``path`` in a report written to ``out_dir``."""
        return cls(Path(path), Path(os.path.relpath(path, out_dir)).as_posix(), alt)


@dataclass
class BulletList:
    items: list[Inline]
    cls: str | None = None


@dataclass
class Raw:
    """Markdown and HTML rendered elsewhere, put in as they are."""

    markdown: str
    html: str


Block = Union[Heading, Paragraph, Table, Image, BulletList, Raw]


def _inline(x: Any, bold: str, code: str, escape: Any) -> str:
    """Inline spans in one markup: ``bold``/``code`` are templates around the escaped text."""
    if isinstance(x, (Bold, Code)):
        return (bold if isinstance(x, Bold) else code).format(escape(x.text))
    if isinstance(x, (list, tuple)):
        return "".join(_inline(p, bold, code, escape) for p in x)
    return escape(str(x))


def _md_inline(x: Any) -> str:
    return _inline(x, "**{}**", "`{}`", str)


def _html_inline(x: Any) -> str:
    return _inline(x, "<b>{}</b>", "<code>{}</code>", _html.escape)


def _md_cell(x: Any) -> str:
    return _md_inline(x).replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    """The blocks as Markdown, one blank line between blocks, ending in one newline."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Paragraph):
            out.append(_md_inline(b.text))
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
            out.append("|" + "|".join("---" for _ in b.headers) + "|")
            out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows)
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.rel})")
        elif isinstance(b, BulletList):
            out.extend(f"- {_md_inline(item)}" for item in b.items)
        elif isinstance(b, Raw):
            out.append(b.markdown)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def embed_png(path: str | os.PathLike) -> str:
    """A ``data:image/png;base64,...`` URI of the file (for self-contained html)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
pre{background:#f6f6f6;padding:0.6em;overflow-x:auto}
.note{color:#555;font-size:0.9em}
.warn{background:#fff4e5;border-left:4px solid #e69500;padding:0.4em 1em}
.ok{color:#1a7f37}.bad{color:#b42318}
"""


def _html_lines(blocks: Sequence[Block]) -> list[str]:
    e = _html.escape
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            anchor = f' id="{e(b.anchor)}"' if b.anchor else ""
            out.append(f"<h{b.level}{anchor}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            cls = f' class="{b.cls}"' if b.cls else ""
            out.append(f"<p{cls}>{_html_inline(b.text)}</p>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in b.headers) + "</tr></thead><tbody>")
            out.extend("<tr>" + "".join(f"<td>{_html_inline(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            out.append("</tbody></table>")
        elif isinstance(b, Image):
            out.append(f'<div><img src="{embed_png(b.path)}" alt="{e(b.alt)}"></div>')
        elif isinstance(b, BulletList):
            cls = f' class="{b.cls}"' if b.cls else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{_html_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Raw):
            out.append(b.html)
    return out


def render_html_fragment(blocks: Sequence[Block]) -> str:
    """The blocks as HTML elements, one per line (a part of a page, no ``<html>`` around it)."""
    return "\n".join(_html_lines(blocks))


def render_html(blocks: Sequence[Block], title: str) -> str:
    """A whole self-contained page: inline CSS, images embedded."""
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_html.escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
    ]
    return "\n".join([*head, *_html_lines(blocks), "</body></html>"]) + "\n"


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` so that a reader sees the old file or the whole new one, never a part."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline=""))
