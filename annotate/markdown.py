"""A tiny, strict markdown renderer for untrusted trajectory text.

Everything is HTML-escaped first; only then is a small subset turned into tags: paragraphs and
line breaks, headings (# to ###), bullet and numbered lists, fenced code blocks, `inline code`,
**bold**, *italic* and [links](https://...) whose URL starts with http:// or https://. Every
other construct stays visible as the text it was written as. No attribute ever takes a value
from the input except a link's href, and that one is escaped text matched against a pattern
with no quotes, spaces or angle brackets in it.
"""

from __future__ import annotations

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

FENCE = re.compile(r"^ {0,3}```")
HEADING = re.compile(r"^ {0,3}(#{1,3})[ \t]+(.*?)[ \t#]*$")
BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(.*)$")
NUMBERED = re.compile(r"^[ \t]*(\d{1,9})[.)][ \t]+(.*)$")
BLOCK_START = re.compile(r" {0,3}(?:```|#{1,3}[ \t])|[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Runs on escaped text: the URL can hold no quote, space or angle bracket, so it cannot leave
# the href attribute; the scheme must be spelled out, so entity tricks or // cannot pass.
LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()\[\]<>\"'`]+)\)", re.IGNORECASE)
STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
EMPHASIS = re.compile(r"\*(?=[^\s*])(.+?)(?<=[^\s*])\*")
TOKEN = re.compile("\x00(\\d+)\x00")
LINK_ATTRS = 'rel="noopener noreferrer nofollow" target="_blank"'


def _inline(text: str) -> str:
    """Escape one block's text and apply the inline subset (code, links, bold, italic)."""
    held: list[str] = []

    def hold(html: str) -> str:
        held.append(html)
        return f"\x00{len(held) - 1}\x00"

    out = escape(text)
    if "`" in out:  # the checks skip the regular expressions for plain text (most of it)
        out = CODE_SPAN.sub(lambda m: hold(f"<code>{m[1]}</code>"), out)
    if "](" in out:
        out = LINK.sub(lambda m: hold(f'<a href="{m[2]}" {LINK_ATTRS}>{m[1]}</a>'), out)
    if "*" in out:
        out = EMPHASIS.sub(r"<em>\1</em>", STRONG.sub(r"<strong>\1</strong>", out))
    return TOKEN.sub(lambda m: held[int(m[1])], out) if held else out


def _list_item(line: str) -> tuple[str, str, str] | None:
    """(tag, start number, item text) when `line` is a list item."""
    if match := BULLET.match(line):
        return "ul", "", match[1]
    if match := NUMBERED.match(line):
        return "ol", match[1], match[2]
    return None


def _is_block_start(line: str) -> bool:
    return bool(BLOCK_START.match(line))


def render_markdown(text: str) -> SafeString:
    """Safe HTML for `text` (see the module docstring for the subset)."""
    lines = text.replace("\x00", "\ufffd").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif FENCE.match(line):
            end = i + 1
            while end < len(lines) and not FENCE.match(lines[end]):
                end += 1
            blocks.append(f"<pre><code>{escape(chr(10).join(lines[i + 1 : end]))}</code></pre>")
            i = end + 1
        elif match := HEADING.match(line):
            level = len(match[1]) + 2  # h3..h5: headings inside a step stay below the page's
            blocks.append(f"<h{level}>{_inline(match[2])}</h{level}>")
            i += 1
        elif item := _list_item(line):
            tag, start, _ = item
            items: list[str] = []
            while i < len(lines) and (next_item := _list_item(lines[i])) and next_item[0] == tag:
                items.append(f"<li>{_inline(next_item[2])}</li>")
                i += 1
            numbered_from = int(start) if tag == "ol" else 1
            opening = f'<ol start="{numbered_from}">' if numbered_from != 1 else f"<{tag}>"
            blocks.append(f"{opening}{''.join(items)}</{tag}>")
        else:
            end = i + 1
            while end < len(lines) and lines[end].strip() and not _is_block_start(lines[end]):
                end += 1
            blocks.append(f"<p>{'<br>'.join(_inline(part) for part in lines[i:end])}</p>")
            i = end
    return mark_safe("\n".join(blocks))  # built from escaped text only
