"""Draw a compiled graph as a PNG with no web service and no extra dependency.

LangGraph's `draw_mermaid_png` calls a web API by default, and `draw_png` needs Graphviz. This module lays the
graph out itself and writes the PNG with the standard library (`zlib`, `struct`) and a built-in bitmap font:

- nodes are placed in layers (longest path from `__start__`, ignoring edges that loop back);
- an edge between adjacent layers is a straight line; an edge that skips layers runs down a lane on the right,
  an edge that loops back runs up a lane on the left; conditional edges are dashed, as in Mermaid;
- the Mermaid text of the same graph is stored in the PNG (a `tEXt` chunk, key `mermaid`), so a test can prove a
  picture matches the current graph.

Command line (writes the PNG and, next to it, the Mermaid text with the `.mmd` suffix):

```
python -m reflection_graph.draw docs/graph.png
```
"""

from __future__ import annotations

import argparse
import struct
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["png_mermaid_text", "reflection_drawable", "render_png", "write_picture"]

# -- a 5x9 bitmap font (rows 0-1 ascenders, 2-6 x-height, baseline under row 6, 7-8 descenders) ------------------
_GLYPHS: dict[str, tuple[str, ...]] = {
    "a": (".....", ".....", ".XXX.", "....X", ".XXXX", "X...X", ".XXXX"),
    "b": ("X....", "X....", "XXXX.", "X...X", "X...X", "X...X", "XXXX."),
    "c": (".....", ".....", ".XXX.", "X....", "X....", "X....", ".XXX."),
    "d": ("....X", "....X", ".XXXX", "X...X", "X...X", "X...X", ".XXXX"),
    "e": (".....", ".....", ".XXX.", "X...X", "XXXXX", "X....", ".XXX."),
    "f": ("..XX.", ".X...", "XXXX.", ".X...", ".X...", ".X...", ".X..."),
    "g": (".....", ".....", ".XXXX", "X...X", "X...X", "X...X", ".XXXX", "....X", ".XXX."),
    "h": ("X....", "X....", "XXXX.", "X...X", "X...X", "X...X", "X...X"),
    "i": ("..X..", ".....", ".XX..", "..X..", "..X..", "..X..", ".XXX."),
    "j": ("...X.", ".....", "..XX.", "...X.", "...X.", "...X.", "...X.", "X..X.", ".XX.."),
    "k": ("X....", "X....", "X..X.", "X.X..", "XX...", "X.X..", "X..X."),
    "l": (".XX..", "..X..", "..X..", "..X..", "..X..", "..X..", ".XXX."),
    "m": (".....", ".....", "XX.X.", "X.X.X", "X.X.X", "X.X.X", "X.X.X"),
    "n": (".....", ".....", "XXXX.", "X...X", "X...X", "X...X", "X...X"),
    "o": (".....", ".....", ".XXX.", "X...X", "X...X", "X...X", ".XXX."),
    "p": (".....", ".....", "XXXX.", "X...X", "X...X", "X...X", "XXXX.", "X....", "X...."),
    "q": (".....", ".....", ".XXXX", "X...X", "X...X", "X...X", ".XXXX", "....X", "....X"),
    "r": (".....", ".....", "X.XX.", "XX..X", "X....", "X....", "X...."),
    "s": (".....", ".....", ".XXXX", "X....", ".XXX.", "....X", "XXXX."),
    "t": (".X...", ".X...", "XXXX.", ".X...", ".X...", ".X..X", "..XX."),
    "u": (".....", ".....", "X...X", "X...X", "X...X", "X..XX", ".XX.X"),
    "v": (".....", ".....", "X...X", "X...X", "X...X", ".X.X.", "..X.."),
    "w": (".....", ".....", "X...X", "X...X", "X.X.X", "X.X.X", ".X.X."),
    "x": (".....", ".....", "X...X", ".X.X.", "..X..", ".X.X.", "X...X"),
    "y": (".....", ".....", "X...X", "X...X", "X...X", "X...X", ".XXXX", "....X", ".XXX."),
    "z": (".....", ".....", "XXXXX", "...X.", "..X..", ".X...", "XXXXX"),
    "0": (".XXX.", "X...X", "X..XX", "X.X.X", "XX..X", "X...X", ".XXX."),
    "1": ("..X..", ".XX..", "..X..", "..X..", "..X..", "..X..", ".XXX."),
    "2": (".XXX.", "X...X", "....X", "...X.", "..X..", ".X...", "XXXXX"),
    "3": ("XXXXX", "...X.", "..X..", "...X.", "....X", "X...X", ".XXX."),
    "4": ("...X.", "..XX.", ".X.X.", "X..X.", "XXXXX", "...X.", "...X."),
    "5": ("XXXXX", "X....", "XXXX.", "....X", "....X", "X...X", ".XXX."),
    "6": ("..XX.", ".X...", "X....", "XXXX.", "X...X", "X...X", ".XXX."),
    "7": ("XXXXX", "....X", "...X.", "..X..", ".X...", ".X...", ".X..."),
    "8": (".XXX.", "X...X", "X...X", ".XXX.", "X...X", "X...X", ".XXX."),
    "9": (".XXX.", "X...X", "X...X", ".XXXX", "....X", "...X.", ".XX.."),
    "_": (".....", ".....", ".....", ".....", ".....", ".....", ".....", "XXXXX"),
    " ": (".....",),
    ":": (".....", ".....", ".....", "..X..", ".....", ".....", "..X.."),
    "-": (".....", ".....", ".....", ".....", ".XXX.", ".....", "....."),
    ".": (".....", ".....", ".....", ".....", ".....", ".....", "..X.."),
    ",": (".....", ".....", ".....", ".....", ".....", ".....", "..X..", ".X..."),
    "(": ("...X.", "..X..", ".X...", ".X...", ".X...", ".X...", ".X...", "..X..", "...X."),
    ")": (".X...", "..X..", "...X.", "...X.", "...X.", "...X.", "...X.", "..X..", ".X..."),
    "/": ("....X", "....X", "...X.", "..X..", ".X...", "X....", "X...."),
    ">": (".....", "X....", ".X...", "..X..", ".X...", "X....", "....."),
    "?": (".XXX.", "X...X", "....X", "...X.", "..X..", ".....", "..X.."),
}
_SCALE = 2
_CHAR_W = 6 * _SCALE  # 5 columns and a gap
_CHAR_H = 9 * _SCALE

Color = tuple[int, int, int]
_WHITE: Color = (255, 255, 255)
_INK: Color = (40, 36, 64)
_LINE: Color = (90, 80, 140)
_FILL: Color = (242, 240, 255)  # Mermaid's default node fill
_END_FILL: Color = (191, 182, 252)  # Mermaid's `last` class
_BORDER: Color = (147, 112, 219)

_BOX_H = 40
_PAD_X = 18
_ROW_GAP = 48
_COL_GAP = 36
_LANE = 22
_MARGIN = 24


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray(_WHITE * (width * height))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(max(0, y0), min(self.height, y1)):
            for x in range(max(0, x0), min(self.width, x1)):
                self.dot(x, y, color)

    def line(
        self, a: tuple[int, int], b: tuple[int, int], color: Color, *, dashed: bool, width: int = 2
    ) -> None:
        (x0, y0), (x1, y1) = a, b
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for step in range(steps + 1):
            if dashed and (step // 6) % 2 == 1:
                continue
            x = x0 + (x1 - x0) * step // steps
            y = y0 + (y1 - y0) * step // steps
            self.rect(x - width // 2, y - width // 2, x - width // 2 + width, y - width // 2 + width, color)

    def triangle(self, points: Sequence[tuple[int, int]], color: Color) -> None:
        (ax, ay), (bx, by), (cx, cy) = points

        def side(px: int, py: int, qx: int, qy: int, rx: int, ry: int) -> int:
            return (px - rx) * (qy - ry) - (qx - rx) * (py - ry)

        for y in range(min(ay, by, cy), max(ay, by, cy) + 1):
            for x in range(min(ax, bx, cx), max(ax, bx, cx) + 1):
                d1 = side(x, y, ax, ay, bx, by)
                d2 = side(x, y, bx, by, cx, cy)
                d3 = side(x, y, cx, cy, ax, ay)
                if not ((d1 < 0 or d2 < 0 or d3 < 0) and (d1 > 0 or d2 > 0 or d3 > 0)):
                    self.dot(x, y, color)

    def text(self, x: int, y: int, text: str, color: Color) -> None:
        for index, char in enumerate(text.lower()):
            glyph = _GLYPHS.get(char, _GLYPHS["?"])
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "X":
                        px, py = x + index * _CHAR_W + col * _SCALE, y + row * _SCALE
                        self.rect(px, py, px + _SCALE, py + _SCALE, color)

    def box(self, x0: int, y0: int, x1: int, y1: int, fill: Color, *, round_ends: bool) -> None:
        radius = (y1 - y0) // 2 if round_ends else 6
        for y in range(y0, y1):
            for x in range(x0, x1):
                dx = max(x0 + radius - x, 0, x - (x1 - 1 - radius))
                dy = max(y0 + radius - y, 0, y - (y1 - 1 - radius))
                dist2 = dx * dx + dy * dy
                if dist2 <= radius * radius:
                    inner = radius - 2
                    edge = x < x0 + 2 or x >= x1 - 2 or y < y0 + 2 or y >= y1 - 2 or dist2 > inner * inner
                    self.dot(x, y, _BORDER if edge else fill)

    def png(self, text_chunks: dict[str, str]) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (
                struct.pack(">I", len(data))
                + kind
                + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
            )

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        texts = b"".join(
            chunk(b"tEXt", k.encode("latin-1") + b"\x00" + v.encode("latin-1"))
            for k, v in text_chunks.items()
        )
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + texts
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


@dataclass
class _Box:
    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def cx(self) -> int:
        return (self.x0 + self.x1) // 2


def _layout(node_ids: list[str], edges: list[Any]) -> tuple[dict[str, int], set[int]]:
    """Layer of each node (longest path from the sources) and the indexes of edges that loop back."""
    out: dict[str, list[tuple[int, str]]] = {n: [] for n in node_ids}
    for i, edge in enumerate(edges):
        out[edge.source].append((i, edge.target))
    back: set[int] = set()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    order: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        for i, target in out[node]:
            if state.get(target) == 1:
                back.add(i)
            elif target not in state:
                visit(target)
        state[node] = 2
        order.append(node)

    for node in node_ids:
        if node not in state:
            visit(node)
    layer = dict.fromkeys(node_ids, 0)
    for node in reversed(order):  # topological order of the graph without back edges
        for i, target in out[node]:
            if i not in back:
                layer[target] = max(layer[target], layer[node] + 1)
    return layer, back


def render_png(drawable: Any, *, title: str | None = None, mermaid: str | None = None) -> bytes:
    """Render a drawable graph (`compiled.get_graph()`) as PNG bytes.

    Args:
        drawable: a `langchain_core.runnables.graph.Graph`, as returned by `CompiledStateGraph.get_graph()`.
        title: a caption drawn above the graph.
        mermaid: Mermaid text stored in the PNG's `tEXt` chunk `mermaid` (default: `drawable.draw_mermaid()`).

    Returns:
        The PNG file's bytes (RGB, deterministic for a given graph).
    """
    node_ids = list(drawable.nodes)
    edges = list(drawable.edges)
    labels = {nid: str(getattr(node, "name", nid)) for nid, node in drawable.nodes.items()}
    layer, back = _layout(node_ids, edges)
    rows: dict[int, list[str]] = {}
    for nid in node_ids:
        rows.setdefault(layer[nid], []).append(nid)
    widths = {nid: len(labels[nid]) * _CHAR_W + 2 * _PAD_X for nid in node_ids}
    row_width = {r: sum(widths[n] for n in ns) + _COL_GAP * (len(ns) - 1) for r, ns in rows.items()}
    core = max(row_width.values(), default=0)
    skip = [i for i, e in enumerate(edges) if i not in back and layer[e.target] - layer[e.source] > 1]
    lanes_left, lanes_right = len(back), len(skip)
    title_h = _CHAR_H + 16 if title else 0
    legend_h = _CHAR_H + 20
    width = 2 * _MARGIN + core + (lanes_left + lanes_right) * _LANE + 2 * _LANE
    width = max(width, 2 * _MARGIN + 32 * _CHAR_W)
    height = 2 * _MARGIN + title_h + len(rows) * (_BOX_H + _ROW_GAP) - _ROW_GAP + legend_h
    canvas = _Canvas(width, height)
    core_x0 = (
        _MARGIN
        + _LANE
        + lanes_left * _LANE
        + (width - 2 * _MARGIN - core - (lanes_left + lanes_right + 2) * _LANE) // 2
    )
    boxes: dict[str, _Box] = {}
    for r in sorted(rows):
        x = core_x0 + (core - row_width[r]) // 2
        y = _MARGIN + title_h + r * (_BOX_H + _ROW_GAP)
        for nid in rows[r]:
            boxes[nid] = _Box(x, y, x + widths[nid], y + _BOX_H)
            x += widths[nid] + _COL_GAP
    if title:
        canvas.text((width - len(title) * _CHAR_W) // 2, _MARGIN, title, _INK)

    def arrow_down(x: int, y: int) -> None:
        canvas.triangle([(x - 6, y - 10), (x + 6, y - 10), (x, y)], _LINE)

    def arrow_side(x: int, y: int, pointing_right: bool) -> None:
        tail = x - 10 if pointing_right else x + 10
        canvas.triangle([(tail, y - 6), (tail, y + 6), (x, y)], _LINE)

    left_lane = {i: _MARGIN + _LANE + (lanes_left - 1 - k) * _LANE for k, i in enumerate(back)}
    right_edge = max((b.x1 for b in boxes.values()), default=0)
    right_lane = {i: right_edge + _LANE * (k + 1) for k, i in enumerate(skip)}
    for i, edge in enumerate(edges):
        a, b = boxes[edge.source], boxes[edge.target]
        dashed = bool(edge.conditional)
        if i in back:
            lane = left_lane[i]
            ya, yb = (a.y0 + a.y1) // 2 + 6, (b.y0 + b.y1) // 2 + 6
            canvas.line((a.x0, ya), (lane, ya), _LINE, dashed=dashed)
            canvas.line((lane, ya), (lane, yb), _LINE, dashed=dashed)
            canvas.line((lane, yb), (b.x0 - 2, yb), _LINE, dashed=dashed)
            arrow_side(b.x0 - 1, yb, pointing_right=True)
            label_at = (lane + 6, (ya + yb) // 2)
        elif i in right_lane:
            lane = right_lane[i]
            ya, yb = (a.y0 + a.y1) // 2 - 6, (b.y0 + b.y1) // 2 - 6
            canvas.line((a.x1, ya), (lane, ya), _LINE, dashed=dashed)
            canvas.line((lane, ya), (lane, yb), _LINE, dashed=dashed)
            canvas.line((lane, yb), (b.x1 + 2, yb), _LINE, dashed=dashed)
            arrow_side(b.x1 + 1, yb, pointing_right=False)
            label_at = (lane + 6, (ya + yb) // 2)
        else:
            start, end = (a.cx, a.y1), (b.cx, b.y0 - 2)
            canvas.line(start, end, _LINE, dashed=dashed)
            arrow_down(b.cx, b.y0 - 1)
            label_at = ((a.cx + b.cx) // 2 + 8, (a.y1 + b.y0) // 2 - _CHAR_H // 2)
        if edge.data:
            canvas.text(label_at[0], label_at[1], str(edge.data), _INK)
    first, last = node_ids[0] if node_ids else None, node_ids[-1] if node_ids else None
    for nid, box in boxes.items():
        terminal = labels[nid] in ("__start__", "__end__")
        fill = _END_FILL if nid == last and terminal else (_WHITE if nid == first and terminal else _FILL)
        canvas.box(box.x0, box.y0, box.x1, box.y1, fill, round_ends=terminal)
        canvas.text(box.x0 + _PAD_X, box.y0 + (_BOX_H - 7 * _SCALE) // 2, labels[nid], _INK)
    legend_y = height - _MARGIN - _CHAR_H
    x = _MARGIN
    canvas.line((x, legend_y + 8), (x + 36, legend_y + 8), _LINE, dashed=False)
    canvas.text(x + 44, legend_y, "always", _INK)
    x += 44 + 7 * _CHAR_W + 16
    canvas.line((x, legend_y + 8), (x + 36, legend_y + 8), _LINE, dashed=True)
    canvas.text(x + 44, legend_y, "conditional", _INK)
    return canvas.png({"mermaid": mermaid if mermaid is not None else drawable.draw_mermaid()})


def png_mermaid_text(data: bytes) -> str | None:
    """The Mermaid text stored in a PNG written by `render_png` (None when there is none)."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG file")
    offset = 8
    while offset + 8 <= len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\x00")
            if key == b"mermaid":
                return value.decode("latin-1")
        offset += 12 + length
    return None


def reflection_drawable(**options: Any) -> Any:
    """The drawable of the reflection graph built with `options` (a stand-in model: drawing needs no model)."""
    from reflection_graph.graph import create_reflection_graph

    def _unused(prompt: str) -> str:
        return ""

    return create_reflection_graph(_unused, **options).get_graph()


def write_picture(path: str | Path, drawable: Any = None, *, title: str | None = "reflection graph") -> Path:
    """Write `drawable` (default: the reflection graph) as a PNG at `path` and its Mermaid text at `path.mmd`.

    Returns:
        The path of the Mermaid file.
    """
    drawable = drawable if drawable is not None else reflection_drawable()
    mermaid = drawable.draw_mermaid()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(render_png(drawable, title=title, mermaid=mermaid))
    mmd = target.with_suffix(".mmd")
    mmd.write_text(mermaid, encoding="utf-8")
    return mmd


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m reflection_graph.draw OUT.png`: draw the reflection graph (PNG + Mermaid next to it)."""
    parser = argparse.ArgumentParser(prog="python -m reflection_graph.draw", description=main.__doc__)
    parser.add_argument("out", help="the PNG file to write, e.g. docs/graph.png")
    parser.add_argument("--human-review", action="store_true", help="draw the graph with the review node")
    args = parser.parse_args(argv)
    drawable = reflection_drawable(human_review=args.human_review)
    mmd = write_picture(args.out, drawable)
    print(f"wrote {args.out} and {mmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
