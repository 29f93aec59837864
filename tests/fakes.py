"""Deterministic fake models for unit tests, each written once here: they record what each role *received*.

- `RecordingChatModel`: replies in order (strings or callables of the messages); `FakeCriticModel` adds
  structured critiques; `WordModel` / `WordCritic` state their exact token bound; `SeededModel` replies by its
  seed (the loop's samples); `ScriptedToolModel` calls tools.
- `LogprobModel`: a judge with next-token log-probabilities (OpenAI-style `top_logprobs`) by the prompt, and a
  written reply otherwise, or answering `JudgeCritic`'s questions (verdict, A or B, has it this fault) by the
  answers asked about; `EmbeddedLogprobs`: the embedded model's call surface with given per-token logprobs;
  `EmbeddedWholeReplies`: the embedded model with its JSON and logprob calls answered by one scripted reply.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

from reflection_graph.critique import CritiqueOutput
from reflection_graph.models.embedded import EmbeddedChatModel


def _usage(text: str, prompt: Sequence[BaseMessage]) -> dict[str, int]:
    inp = sum(len(str(m.content).split()) for m in prompt)
    out = len(text.split())
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


class RecordingChatModel(GenericFakeChatModel):
    """Replies with `replies` in order (strings, `AIMessage`s, exceptions to raise, or callables of the received
    messages returning one of those) and records each prompt. `uses_chat_template` says it is prompted through a
    chat template, as an instruction-tuned GGUF is (`models.profile.describe` reads it)."""

    replies: list[Any] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    uses_chat_template: bool = False

    def _reply_to(self, messages: list[BaseMessage], index: int) -> Any:
        """The scripted reply to call `index` (from 0): the last reply repeats; none scripted is `draft N`."""
        return self.replies[min(index, len(self.replies) - 1)] if self.replies else f"draft {index + 1}"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        reply = self._reply_to(messages, len(self.received) - 1)
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, AIMessage):  # a reply with metadata of its own (a finish reason, say)
            return ChatResult(generations=[ChatGeneration(message=reply)])
        text = str(reply)
        message = AIMessage(content=text, usage_metadata=_usage(text, messages))  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def prompts(self) -> list[str]:
        """The last human message of each call."""
        return [str(m[-1].content) for m in self.received]


class FakeCriticModel(RecordingChatModel):
    """A critic model with structured output: each call returns the next scripted critique.

    `critiques` entries are dicts of CritiqueOutput fields, callables of the received messages returning such a
    dict, exceptions to raise, or strings (returned as raw unparsable text).
    """

    critiques: list[Any] = Field(default_factory=list)

    def _reply_to(self, messages: list[BaseMessage], index: int) -> Any:
        item = self.critiques[min(index, len(self.critiques) - 1)]
        if callable(item) and not isinstance(item, type):
            item = item(messages)
        if isinstance(item, (BaseException, str)):
            return item
        return CritiqueOutput.model_validate(item).model_dump_json()

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:  # type: ignore[override]
        return _structured(self, schema, include_raw)


class SeededModel(RecordingChatModel):
    """A sampling model whose reply shows which sample it is: `reply_of(seed, temperature, prompt)`, by default
    `sample seed=S t=T`. The loop draws sample i as a copy at seed + i (`_calls.sampled`), which shares
    `received`. Each call first waits `delay_s` (`asyncio.sleep` when called async)."""

    seed: int = 0
    temperature: float = 0.0
    delay_s: float = 0.0
    reply_of: Any = None

    def _reply_to(self, messages: list[BaseMessage], index: int) -> Any:
        if self.reply_of is None:
            return f"sample seed={self.seed} t={self.temperature}"
        return self.reply_of(self.seed, self.temperature, str(messages[-1].content))

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        time.sleep(self.delay_s)
        return super()._generate(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        await asyncio.sleep(self.delay_s)
        return super()._generate(messages)


class ScriptedToolModel(BaseChatModel):
    """A tool-calling fake (as `FakeToolCallingModel` in LangChain's tests): replies with `script` in order."""

    script: list[AIMessage]
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        reply = self.script[len(self.received) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:  # type: ignore[override]
        self.bound_tools = [getattr(t, "name", str(t)) for t in tools]
        return self


def _structured(model: BaseChatModel, schema: Any, include_raw: bool) -> Runnable[Any, Any]:
    """Like a provider's structured output: the model's raw reply, then a step parsing it as `schema`'s JSON."""

    def _parse(raw: AIMessage) -> Any:
        try:
            parsed: Any = schema.model_validate_json(str(raw.content))
            error: Exception | None = None
        except Exception as exc:  # noqa: BLE001
            parsed, error = None, exc
        if include_raw:
            return {"raw": raw, "parsed": parsed, "parsing_error": error}
        if error is not None:
            raise error
        return parsed

    return model | RunnableLambda(_parse, name="parse_structured")


class WordModel(RecordingChatModel):
    """Says exactly how many tokens a call can use (`token_bound`, as the embedded model does with its tokenizer):
    the prompt's words, as `_usage` counts them, plus a reply limit of `REPLY_WORDS` words."""

    def token_bound(self, messages: list[BaseMessage], **options: Any) -> int:
        return sum(len(str(m.content).split()) for m in messages) + REPLY_WORDS


class WordCritic(FakeCriticModel):
    """`FakeCriticModel` with `WordModel`'s exact bound (its scripted replies are shorter than `REPLY_WORDS`)."""

    def token_bound(self, messages: list[BaseMessage], **options: Any) -> int:
        return sum(len(str(m.content).split()) for m in messages) + REPLY_WORDS


REPLY_WORDS = 64


def critique(
    score: float, ok: bool = False, issues: Sequence[str] = ("too vague",), feedback: str = ""
) -> dict[str, Any]:
    return {
        "issues": list(issues),
        "suggestions": [f"fix: {i}" for i in issues],
        "is_acceptable": ok,
        "score": score,
        "feedback": feedback or f"score {score}",
    }


def numbered_drafts(prefix: str = "draft") -> Callable[[list[BaseMessage]], str]:
    counter = {"n": 0}

    def reply(_: list[BaseMessage]) -> str:
        counter["n"] += 1
        return f"{prefix} {counter['n']}"

    return reply


# -- the embedded model over a scripted llama.cpp --------------------------------------------------------------

EOG = None
"""A `ScriptedLlama` script entry: the end-of-generation token."""
FIRST_ID = 1000


class ScriptedLlama:
    """Generates a scripted list of token texts the way `Llama.create_completion(stream=False)` does.

    Equal texts are one token, as in a real vocabulary (an entry's id is `FIRST_ID` plus the index of its text's
    first entry), so a script that repeats itself repeats its token ids. `gate(i)` runs before token `i` is sampled
    (a test holds the call there). `sampled` counts the tokens sampled by the last call, `ended` is set when a
    call returns.
    """

    def __init__(self, script: Sequence[str | None], gate: Callable[[int], None] | None = None) -> None:
        self.script = list(script)
        self.ids = [FIRST_ID + self.script.index(entry) for entry in self.script]
        self.gate = gate
        self.sampled = 0
        self.ended = threading.Event()

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [1] * (int(add_bos) + len(text.split()))

    def detokenize(self, ids: Sequence[int]) -> bytes:
        return b"".join((self.script[i - FIRST_ID] or "").encode() for i in ids)

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: Sequence[int]) -> None:
        """The prompt evaluated before `create_completion` (`_reuse.evaluate`): only counted here."""
        self.n_tokens = getattr(self, "n_tokens", 0) + len(tokens)

    def create_completion(
        self,
        prompt: str | list[int],
        *,
        max_tokens: int,
        stop: Sequence[str],
        stopping_criteria: Any = None,
        grammar: Any = None,
        **sampling: Any,
    ) -> dict[str, Any]:
        self.ended.clear()
        prompt_ids = self.tokenize(prompt.encode()) if isinstance(prompt, str) else list(prompt)
        completion: list[int] = []
        text, finish, evaluated = b"", "length", 0
        for i, entry in enumerate([*self.script, EOG]):
            if self.gate is not None:
                self.gate(i)
            self.sampled = i + 1
            if stopping_criteria is not None and stopping_criteria(
                numpy.array(prompt_ids + completion), None
            ):
                evaluated = len(
                    completion
                )  # every token it returned was evaluated before this one was sampled
                break  # llama-cpp-python's `generate` returns; the check after the loop decides
            if entry is EOG:
                text, finish, evaluated = self.detokenize(completion), "stop", len(completion)
                break
            completion.append(self.ids[i])
            evaluated = len(completion) - 1
            written = self.detokenize(completion)
            hits = [s.encode() for s in stop if s.encode() in written]
            if hits:
                text, finish = written[: written.index(hits[0])], "stop"
                break
            if len(completion) >= max_tokens:
                text, finish = written, "length"
                break
        if stopping_criteria is not None and stopping_criteria(
            numpy.array(prompt_ids + completion[:evaluated]), None
        ):
            text, finish = self.detokenize(completion), "stop"
        self.ended.set()
        n_in, n_out = len(prompt_ids), len(completion)
        return {
            "choices": [{"text": text.decode("utf-8", errors="ignore"), "finish_reason": finish}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        }


def scripted_embedded(
    monkeypatch: Any,
    tmp_path: Path,
    script: Sequence[str | None],
    gate: Callable[[int], None] | None = None,
    cls: type[Any] | None = None,
    **fields: Any,
) -> Any:
    """An `EmbeddedChatModel` (or subclass `cls`) whose loaded model is a `ScriptedLlama` (completion-style, no
    chat template); `monkeypatch` undoes the patching after the test."""
    from reflection_graph.models import embedded
    from reflection_graph.models._llama import _Loaded

    gguf = tmp_path / "scripted.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded
    monkeypatch.setattr(embedded, "has_chat_template", lambda path: False)
    loaded = _Loaded(llama=ScriptedLlama(script, gate), lock=threading.Lock())
    monkeypatch.setattr(embedded.EmbeddedChatModel, "_loaded", lambda self: loaded)
    return (cls or embedded.EmbeddedChatModel)(model_path=str(gguf), **fields)


def _reply(text: str, metadata: Mapping[str, Any] | None = None) -> ChatResult:
    message = AIMessage(content=text, response_metadata=dict(metadata or {}))
    return ChatResult(generations=[ChatGeneration(message=message)])


HAS, FREE = "Does this answer have this fault: ", "Is this answer free of this fault: "
CHOICE = "A reviewer wrote about this answer: "
"""The cues of `JudgeCritic`'s fault questions: does the answer have the fault, is it free of it, and the choice
between "the reviewer is right" and "wrong"."""


def answer_of(prompt: str) -> str:
    """The answer in a one-answer question (the question follows the last blank line)."""
    return prompt.split("Answer:\n", 1)[1].rsplit("\n\n", 1)[0]


def answers_of(prompt: str) -> tuple[str, str]:
    """Answers A and B in a comparison."""
    a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:\n", 1)[0]
    b = prompt.split("Answer B:\n", 1)[1].rsplit("\n\n", 1)[0]
    return a, b


def fault_of(prompt: str) -> str:
    """The fault asked about in a has-it / is-it-free-of-it question or a choice."""
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


class LogprobModel(BaseChatModel):
    """A judge with next-token log-probabilities; records every call's prompt and options (`calls`), the options
    with the temperature the call ran at (a bound option, else the called model's own: a critic may call a copy
    of it at another temperature, which shares `calls`).

    A call with `logprobs=True` lists next-token alternatives as OpenAI-style `top_logprobs` and replies with the
    first; with `with_logprobs=False` the reply carries none (a server that ignores the option). The alternatives
    (token -> probability) are `top(prompt)` when given; else, when any of `yes`, `better`, `fault` is given, the
    answer to `JudgeCritic`'s question (`judged`); else P(" Yes") = P(" No") = 0.5. Any other call replies
    `written(prompt)` (a string or a callable of the prompt). `error`, when set, is raised by every call.
    Structured output parses the written reply as the schema's JSON.

    `JudgeCritic`'s questions are answered by the answers they ask about:
    - `yes(answer)`: P(Yes) to "is it correct?" (the verdict);
    - `better(a, b)`: the judge's unbiased chance that A is better, to which `bias` is added in log-odds (a judge
      that favours A; `better=lambda a, b: 0.5` with a large `bias` answers by position alone);
    - `fault(answer, issue)`: the unbiased chance that `answer` has the fault `issue`; to "does it have it?" and to
      "is it free of it?" the judge adds `yes_bias` to Yes in log-odds (a judge that says Yes to anything); to the
      choice between "the reviewer is right" and "wrong" it adds `bias` to place A.
    """

    top: Any = None
    yes: Any = None
    better: Any = None
    bias: float = 1.5
    fault: Any = None
    yes_bias: float = 0.0
    written: Any = ""
    with_logprobs: bool = True
    error: Any = None
    temperature: float = 0.0  # a judge at temperature 0 already (`critic_model` keeps it as it is)
    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-logprobs"

    @property
    def prompts(self) -> list[str]:
        """The last message of each call."""
        return [prompt for prompt, _ in self.calls]

    def kinds(self) -> list[str]:
        """The kind of each call so far, by `JudgeCritic`'s questions: verdict, A-or-B, choice, has, free, or
        written (a call without logprobs)."""
        out = []
        for prompt, options in self.calls:
            if not options.get("logprobs"):
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

    def judged(self, prompt: str) -> dict[str, float]:
        """The next-token alternatives to `JudgeCritic`'s question in `prompt` (token -> probability)."""
        if CHOICE in prompt:  # "the reviewer is right" is held at its chance, plus `bias` to place A
            p_held = min(max(float(self.fault(answer_of(prompt), fault_of(prompt))), 1e-6), 1 - 1e-6)
            held_first = "A: The reviewer is right" in prompt
            p_a = _logistic(_logit(p_held if held_first else 1 - p_held) + self.bias)
            return {"A": p_a * 0.9, "B": (1 - p_a) * 0.9, "Answer": 0.05}
        if "A or B" in prompt:
            p_a = _logistic(_logit(self.better(*answers_of(prompt))) + self.bias)
            return {"A": p_a * 0.9, "B": (1 - p_a) * 0.9, "Answer": 0.05}
        if HAS in prompt or FREE in prompt:
            p = float(self.fault(answer_of(prompt), fault_of(prompt)))
            p = p if HAS in prompt else 1 - p
            p = _logistic(_logit(min(max(p, 1e-6), 1 - 1e-6)) + self.yes_bias)
        else:
            p = float(self.yes(answer_of(prompt)))
        return {"Yes": p * 0.8, "No": (1 - p) * 0.8, " yes": p * 0.1}

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        self.calls.append((prompt, {"temperature": self.temperature, **kw, "stop": stop}))
        if self.error is not None:
            raise self.error
        if not kw.get("logprobs"):
            return _reply(self.written(prompt) if callable(self.written) else str(self.written))
        if self.top is not None:
            probabilities = dict(self.top(prompt))
        elif any(f is not None for f in (self.yes, self.better, self.fault)):
            probabilities = self.judged(prompt)
        else:
            probabilities = {" Yes": 0.5, " No": 0.5}
        top = [{"token": token, "logprob": math.log(p)} for token, p in probabilities.items()]
        first = top[0]
        if not self.with_logprobs:
            return _reply(first["token"])
        return _reply(first["token"], {"logprobs": {"content": [{**first, "top_logprobs": top}]}})

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:  # type: ignore[override]
        return _structured(self, schema, include_raw)


class EmbeddedLogprobs(EmbeddedChatModel):
    """The embedded model's call surface without llama.cpp: a scoring call (`logprobs=True` with `score_text`)
    gets `token_logprobs` as the scored continuation's per-token logprobs; any other call replies `written`.
    Records every prompt."""

    token_logprobs: list[float] = Field(default_factory=list)
    written: str = ""
    prompts: list[str] = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        self.prompts.append(prompt)
        if not kw.get("logprobs"):
            return _reply(self.written)
        assert prompt.endswith(kw["score_text"]), "the scored text ends the prompt"
        return _reply(" ", {"prompt_logprobs": list(self.token_logprobs)})


class EmbeddedWholeReplies(EmbeddedChatModel):
    """The embedded model with JSON and log-probability calls answered by one scripted whole reply (their real
    paths need the real model); other calls take the model's own path (with `scripted_embedded(cls=...)`, a
    `ScriptedLlama`)."""

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if kwargs.get("json_schema") is not None or kwargs.get("top_logprobs") is not None:
            meta = {"finish_reason": "stop", "model_name": "x", "logprobs": {"content": []}}
            usage = {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}
            text = '{"score": 7, "note": "a whole reply"}'
            message = AIMessage(content=text, usage_metadata=usage, response_metadata=meta)  # type: ignore[arg-type]
            return ChatResult(generations=[ChatGeneration(message=message)])
        return super()._generate(messages, stop, run_manager, **kwargs)
