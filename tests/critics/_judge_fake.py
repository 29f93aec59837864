"""A fake log-probability judge for `JudgeCritic` tests: next-token logprobs by the question asked, a scripted
written critique, and every call recorded."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

HAS, FREE = "Does this answer have this fault: ", "Is this answer free of this fault: "
CHOICE = "A reviewer wrote about this answer: "


def top(**probs: float) -> list[dict[str, Any]]:
    """OpenAI-style `top_logprobs` entries from token -> probability."""
    return [{"token": token, "logprob": math.log(p)} for token, p in probs.items()]


def answer_of(prompt: str) -> str:
    """The answer in a one-answer question (the question follows the last blank line)."""
    return prompt.split("Answer:\n", 1)[1].rsplit("\n\n", 1)[0]


def answers_of(prompt: str) -> tuple[str, str]:
    """Answers A and B in a comparison."""
    a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:\n", 1)[0]
    b = prompt.split("Answer B:\n", 1)[1].rsplit("\n\n", 1)[0]
    return a, b


def fault_of(prompt: str) -> str:
    if CHOICE in prompt:
        return prompt.split(CHOICE, 1)[1].split("\nWhich is true?", 1)[0]
    for cue in (HAS, FREE):
        if cue in prompt:
            return prompt.split(cue, 1)[1].split("\nReply with", 1)[0]
    raise ValueError("not a fault question")


def _logistic(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _logit(p: float) -> float:
    return math.log(p) - math.log(1 - p)


class JudgeModel(BaseChatModel):
    """Next-token logprobs by the question asked, and a scripted written critique; records every call.

    - `yes(answer)`: P(Yes) to "is it correct?" (the verdict);
    - `better(a, b)`: the judge's unbiased chance that A is better, to which `bias` is added in log-odds (a judge
      that favours A; `better=lambda a, b: 0.5` with a large `bias` answers by position alone);
    - `written(prompt)`: the written critique's JSON text;
    - `fault(answer, issue)`: the unbiased chance that `answer` has the fault `issue`; to "does it have it?" and to
      "is it free of it?" the judge adds `yes_bias` to Yes in log-odds (a judge that says Yes to anything); to the
      choice between "the reviewer is right" and "wrong" it adds `bias` to place A.
    """

    yes: Any = None
    better: Any = None
    bias: float = 1.5
    written: Any = None
    fault: Any = None
    yes_bias: float = 0.0
    with_logprobs: bool = True
    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-judge"

    def kinds(self) -> list[str]:
        """The kind of each call so far: verdict, A-or-B, choice, has, free or written."""
        out = []
        for prompt, kw in self.calls:
            if not kw.get("logprobs"):
                out.append("written")
            elif CHOICE in prompt:
                out.append("choice")
            elif "A or B" in prompt:
                out.append("A-or-B")
            elif HAS in prompt:
                out.append("has")
            elif FREE in prompt:
                out.append("free")
            else:
                out.append("verdict")
        return out

    def _p_yes(self, prompt: str) -> float:
        if HAS in prompt or FREE in prompt:
            p = float(self.fault(answer_of(prompt), fault_of(prompt)))
            p = p if HAS in prompt else 1 - p
            return _logistic(_logit(min(max(p, 1e-6), 1 - 1e-6)) + self.yes_bias)
        return float(self.yes(answer_of(prompt)))

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        self.calls.append((prompt, dict(kw)))
        if not kw.get("logprobs"):
            text = self.written(prompt) if callable(self.written) else '{"faults": []}'
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])
        meta: dict[str, Any] = {}
        if self.with_logprobs:
            if CHOICE in prompt:  # "the reviewer is right" is held at its chance, plus `bias` to place A
                p_held = float(self.fault(answer_of(prompt), fault_of(prompt)))
                p_held = min(max(p_held, 1e-6), 1 - 1e-6)
                held_first = "A: The reviewer is right" in prompt
                p_a = _logistic(_logit(p_held if held_first else 1 - p_held) + self.bias)
                alternatives = top(A=p_a * 0.9, B=(1 - p_a) * 0.9, Answer=0.05)
            elif "A or B" in prompt:
                a, b = answers_of(prompt)
                p_a = _logistic(_logit(self.better(a, b)) + self.bias)
                alternatives = top(A=p_a * 0.9, B=(1 - p_a) * 0.9, Answer=0.05)
            else:
                p = self._p_yes(prompt)
                alternatives = [
                    *top(Yes=p * 0.8, No=(1 - p) * 0.8),
                    {"token": " yes", "logprob": math.log(p * 0.1)},
                ]
            first = alternatives[0]["token"]
            meta["logprobs"] = {"content": [{"token": first, "logprob": 0.0, "top_logprobs": alternatives}]}
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content="A", response_metadata=meta))]
        )

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kw: Any
    ) -> Runnable[Any, Any]:  # type: ignore[override]
        def parse(raw: AIMessage) -> Any:
            try:
                parsed, error = schema.model_validate_json(str(raw.content)), None
            except ValueError as exc:
                parsed, error = None, exc
            return {"raw": raw, "parsed": parsed, "parsing_error": error} if include_raw else parsed

        return self | RunnableLambda(parse)
