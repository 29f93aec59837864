"""A reference-based ground truth for (task, good, bad) pair records such as pairs.jsonl (a `module:function` scorer).

    reflection-graph eval datasets/pairs.jsonl --scorer good_vs_bad:score --pass-mark 0.75 --out eval-pairs

The tokens (words and single symbols) that tell the two reference answers apart decide: `G` = the tokens of `good`
that `bad` lacks, `B` = the tokens of `bad` that `good` lacks. The score is the mean of the share of `G` the
candidate contains and the share of `B` it avoids: 1 for the good answer itself ("Paris" and no "Berlin"), 0 for
the bad one, 0.5 for an answer that has neither (so use a pass mark above 0.5, e.g. `--pass-mark 0.75`). It needs
no model, so it never shares the loop critic's blind spots.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")  # words, and each symbol (JSON braces, operators)


def _words(text: str) -> set[str]:
    return set(_TOKEN.findall(text.lower()))


def score(record: dict[str, Any], candidate: str) -> float:
    """The share of the good answer's distinguishing words present, averaged with the share of the bad's absent."""
    good, bad, text = _words(str(record["good"])), _words(str(record["bad"])), _words(candidate)
    only_good, only_bad = good - bad, bad - good
    found = len(text & only_good) / len(only_good) if only_good else 1.0
    avoided = 1.0 - (len(text & only_bad) / len(only_bad) if only_bad else 0.0)
    return (found + avoided) / 2
