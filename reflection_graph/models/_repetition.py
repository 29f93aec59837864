"""Stopping a reply that repeats itself: greedy decoding of a small model can fall into a loop, writing a span of
text and then that very span again, back to back, until its reply limit. A loop is stopped as soon as the tokens
generated so far end in one span repeated exactly: at least `MIN_COPIES` copies, the repeats after the first
covering at least `MIN_REPEATED_TOKENS` tokens, the span at most `MAX_PERIOD` tokens long. The reply then keeps
what the model wrote up to the end of the span's first copy, and reports `finish_reason` `REPETITION`.

The check is incremental: for every period p up to `MAX_PERIOD` it keeps how many of the latest tokens equal the
token p before them (`RepetitionDetector.push`: one comparison a period a token, no pass over the whole reply). A
suffix of the reply has period p exactly when that count reaches its length minus p, so a loop is caught at the very
token it qualifies, and where its first copy ends is known without searching. Short legitimate repeats (a table
rule `| --- | --- |`, `0, 0, 0`, a line of `====`) never cover `MIN_REPEATED_TOKENS` tokens of repeats; a reply that
varies a single token between copies never matches at all.

A repetition the task asks for is no loop. `requested_copies` reads the counts a prompt asks for ("6 rows",
"five identical dicts", "repeat it 10 times": a number, in digits or words, before a plural noun or "times"), and
a detector told that count (`requested`) lets that many copies through: it stops at `requested + 1` copies (never
fewer than `MIN_COPIES`), and the reply keeps the copies that were asked for. Reading a count too many only lets a
loop run on to the reply limit, where the reply is cut anyway ("length"); reading one too few would cut the answer
the user asked for, so any count in the prompt counts, the largest wins, and only counts of a text's length
("300 words", "80 characters") are left out: they measure the answer, they ask for no copies.

`RepetitionStop` is the detector as llama-cpp-python's stopping criterion (`create_completion(...,
stopping_criteria=StoppingCriteriaList([...]))`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_PERIOD",
    "MIN_COPIES",
    "MIN_REPEATED_TOKENS",
    "REPETITION",
    "Loop",
    "RepetitionDetector",
    "RepetitionStop",
    "requested_copies",
]

REPETITION = "repetition"
"""The `finish_reason` of a reply stopped because it repeated itself (the loop treats it as cut, like "length")."""
MAX_PERIOD = 256
"""The longest repeated span looked for, in tokens (about 1,000 characters of English)."""
MIN_COPIES = 3
"""The fewest copies of the span (the span and two exact repeats) that make a loop."""
MIN_REPEATED_TOKENS = 64
"""The fewest tokens the repeats after the span's first copy must cover: short runs such as `0, 0, 0` or a table
rule never do."""


@dataclass(frozen=True)
class Loop:
    """A loop found in a reply's tokens.

    Attributes:
        period: the tokens of the repeated span.
        start: where the span's first copy starts (an index into the generated tokens); the copies run back to back
            from there, as far back as they go.
        end: the tokens generated when the loop was found (the last copy may be partial).
        copies: the copies the reply keeps: the ones the task asked for (`requested_copies`), else the first.
    """

    period: int
    start: int
    end: int
    copies: int = 1

    @property
    def keep(self) -> int:
        """The tokens the reply keeps: up to the end of the span's last copy kept (`copies`)."""
        return self.start + self.copies * self.period


class RepetitionDetector:
    """Finds, token by token, the first point at which a reply's tokens end in a loop (see the module doc).

    Args:
        max_period: the longest span looked for, in tokens.
        min_repeated: the fewest tokens the repeats after the first copy must cover.
        min_copies: the fewest copies of the span, the first included (at least 2).
        requested: the copies the task asks for (`requested_copies`; 1: none): a loop needs one copy more (and
            at least `min_copies`), and the reply keeps that many.

    Example:
        ```python
        detector = RepetitionDetector()
        for token in tokens:
            if detector.push(token) is not None:
                break
        kept = tokens[: detector.loop.keep] if detector.loop else tokens
        ```
    """

    def __init__(
        self,
        max_period: int = MAX_PERIOD,
        min_repeated: int = MIN_REPEATED_TOKENS,
        min_copies: int = MIN_COPIES,
        requested: int = 1,
    ) -> None:
        if max_period < 1 or min_repeated < 1 or min_copies < 2 or requested < 1:
            raise ValueError(
                f"max_period ({max_period}), min_repeated ({min_repeated}) and requested ({requested}) must be at "
                f"least 1 and min_copies ({min_copies}) at least 2"
            )
        self.max_period = max_period
        self.requested = requested
        min_copies = max(min_copies, requested + 1)
        self.tokens: list[int] = []
        self.loop: Loop | None = None
        # runs[p]: how many of the latest tokens equal the token p before them; the latest runs[p] + p tokens then
        # have period p. A loop of period p needs runs[p] >= need[p] (the repeats after its first copy).
        self._runs = [0] * (max_period + 1)
        self._need = [0, *(max((min_copies - 1) * p, min_repeated) for p in range(1, max_period + 1))]
        self._longest = 0

    def push(self, token: int) -> Loop | None:
        """Read the next generated token; the loop the tokens now end in (the first one found), or None.

        Once a loop is found it is kept, and later tokens are not read."""
        if self.loop is not None:
            return self.loop
        tokens, runs, need = self.tokens, self._runs, self._need
        n = len(tokens)
        longest, found, period = 0, 0, 0
        for p in range(1, min(n, self.max_period) + 1):
            if tokens[n - p] == token:
                run = runs[p] + 1
                runs[p] = run
                if run > longest:
                    longest = run
                if (
                    run >= need[p] and run > found
                ):  # the loop that keeps the least; the shortest span on a tie
                    found, period = run, p
            else:
                runs[p] = 0
        tokens.append(token)
        self._longest = longest
        if period:
            end = n + 1
            self.loop = Loop(period=period, start=end - found - period, end=end, copies=self.requested)
        return self.loop

    def extend(self, tokens: Any) -> Loop | None:
        """`push` each of `tokens` in turn, up to the first loop; the loop found, or None."""
        for token in tokens:
            if self.push(int(token)) is not None:
                break
        return self.loop

    @property
    def settled(self) -> int:
        """How many of the tokens read so far no loop found later can drop: a later loop's first copy ends no
        earlier than where the longest current run of repeats began (with a loop found: the tokens it keeps)."""
        if self.loop is not None:
            return self.loop.keep
        return len(self.tokens) - self._longest


class RepetitionStop:
    """llama-cpp-python's stopping criterion that ends a completion at the first loop (`RepetitionDetector`).

    llama-cpp-python calls it after each sampled token with the tokens accepted so far, the prompt first and the
    newest token not yet among them, and once more after its generation loop. Its first call holds exactly the
    prompt, so the tokens after that length are the generated ones. It returns True from the call that completes a
    loop on, and llama-cpp-python then ends the completion with `finish_reason` "stop" and the text of every
    token it generated; `loop` says where to cut. A later call that holds no more than a prompt starts a new
    completion (the same criterion replays a recorded call, as `bench/bench_embedded.py` does).

    Args:
        **limits: `RepetitionDetector`'s `max_period`, `min_repeated`, `min_copies`, `requested`.
    """

    def __init__(self, **limits: int) -> None:
        self._limits = limits
        self.detector = RepetitionDetector(**limits)
        self._start: int | None = None

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        if self._start is None or len(input_ids) <= self._start:  # the first call of a completion: its prompt
            self._start = len(input_ids)
            self.detector = RepetitionDetector(**self._limits)
        return self.detector.extend(input_ids[self._start + len(self.detector.tokens) :]) is not None

    @property
    def loop(self) -> Loop | None:
        """The loop that stopped the completion, or None."""
        return self.detector.loop

    @property
    def settled(self) -> int:
        """`RepetitionDetector.settled` of the completion's generated tokens."""
        return self.detector.settled

    def kept(self) -> list[int]:
        """The generated tokens a reply keeps: up to the end of the loop's copies kept (all of them without one)."""
        tokens = self.detector.tokens
        return tokens[: self.loop.keep] if self.loop is not None else list(tokens)


_UNITS = dict(
    zip(
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split(),
        range(1, 20),
        strict=True,
    ),
    dozen=12,
    hundred=100,
)
_TENS = dict(
    zip("twenty thirty forty fifty sixty seventy eighty ninety".split(), range(20, 100, 10), strict=True)
)
_DIGIT_WORDS = "|".join(list(_UNITS)[:9])
_NUMBER = rf"\d{{1,4}}|(?:{'|'.join(_TENS)})(?:[- ](?:{_DIGIT_WORDS}))?|{'|'.join(_UNITS)}"
_COUNT = re.compile(
    rf"\b({_NUMBER})(?:\s+(?:of\s+)?[A-Za-z][\w'-]*){{0,3}}?\s+(times|[A-Za-z][\w'-]*s)\b", re.IGNORECASE
)
"""A count: a number, then up to three words ("identical user", "of the"), then a plural noun or "times"."""
_NOT_COPIES = frozenset(
    {"words", "characters", "chars", "letters", "syllables", "sentences", "tokens", "bytes", "digits"}
    | {"is", "was", "has", "as", "its", "this", "his", "us", "thus", "plus", "minus", "less", "always"}
)
"""Words after a number that ask for no copies: a measure of the answer's length, or no noun at all."""


def requested_copies(text: str) -> int:
    """The most copies `text` (a prompt) may ask for: the largest count it holds (see the module doc), or 1.

    Example:
        ```python
        requested_copies("A literal with 6 rows of nine zeros")  # 9
        requested_copies("Write an essay of at least 300 words")  # 1
        ```
    """
    counts = [1]
    for match in _COUNT.finditer(text):
        if match.group(2).lower() not in _NOT_COPIES:
            counts.append(_number(match.group(1)))
    return max(counts)


def _number(word: str) -> int:
    """The value of a number `_COUNT` matched: digits, a number word, or tens and units ("twenty-five")."""
    if word.isdigit():
        return int(word)
    parts = re.split(r"[- ]", word.lower())
    return sum(_TENS.get(part, 0) or _UNITS[part] for part in parts)
