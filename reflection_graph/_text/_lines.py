"""Lines a person reads: whole sentences, in the task's script.

A critique line is kept only as far as it runs in whole sentences (each ends with `.`, `!` or `?` before a space or
the end, or with `。`, `！` or `？`; closing quotes and brackets allowed after it) written in the letters of the task's own script(s): Latin for an English task,
Cyrillic for a Russian one, Han and kana for a Japanese one. A line cut by a length limit ("... which is important
to show respect to") keeps its sentences before the cut, or nothing; a line that drifts into another script ("For
example: 'I appreciate the邀") keeps its sentences before the drift. Digits, punctuation and symbols belong to
every script.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["script_of", "scripts", "whole_line"]

_GROUPS = {
    name: "CJK"
    for name in ("CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "IDEOGRAPHIC", "HALFWIDTH", "FULLWIDTH")
}
_NEUTRAL = frozenset({"MODIFIER", "MATHEMATICAL", "SCRIPT", "DOUBLE-STRUCK", "BLACK-LETTER", "CIRCLED"})
_SENTENCE = re.compile(r".*?(?:[.!?]+[\"'”’)\]]*(?=\s|\Z)|[。！？]+[」』”’）)]*)", re.S)
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|approx)\.\Z", re.I)


def script_of(char: str) -> str | None:
    """The script of a letter (`LATIN`, `CYRILLIC`, `GREEK`, `CJK` for Han and kana, ...); None for a character
    that is not a letter or belongs to no one script (digits, punctuation, symbols, modifier letters)."""
    if not char.isalpha():
        return None
    try:
        first = unicodedata.name(char).split()[0]
    except ValueError:
        return None
    if first in _NEUTRAL:
        return None
    return _GROUPS.get(first, first)


def scripts(*texts: str | None) -> frozenset[str]:
    """The scripts of the letters in `texts`."""
    return frozenset(s for text in texts if text for ch in text if (s := script_of(ch)) is not None)


def _sentences(text: str) -> list[str]:
    """The whole sentences `text` opens with, in order (an abbreviation such as "e.g." does not end one).

    Each sentence is matched where the last one ended, and a text with no more endings stops the reading: a search
    would try every later place, each to the end of the text. An abbreviation is looked for in the piece's own
    end, with one character before it for the word boundary."""
    out: list[str] = []
    pending: list[str] = []
    rest = len(text.rstrip())  # past it there is only space
    at = 0
    while match := _SENTENCE.match(text, at):
        at = match.end()
        piece = match.group(0)
        before = pending[-1][-1:] if pending else ""
        if _ABBREVIATION.search(before + piece.rstrip("\"'”’)]")) and at < rest:
            pending.append(piece)  # "e.g." inside a sentence; at the very end of the text it ends one
            continue
        out.append("".join([*pending, piece]))
        pending = []
    return out


def whole_line(text: str, allowed: frozenset[str]) -> str:
    """The longest opening of `text` made of whole sentences in the `allowed` scripts ("" when there is none).

    A sentence that holds a letter of another script ends the line before it (when `allowed` is empty, any
    script is allowed).
    """
    kept: list[str] = []
    for sentence in _sentences(" ".join(text.split())):
        if allowed and not scripts(sentence) <= allowed:
            break
        kept.append(sentence)
    return "".join(kept).strip()
