"""The production path: `ChatOpenAI` against llama.cpp's OpenAI-compatible server on loopback (no mocked HTTP).

Findings this file pins down (llama-cpp-python's server running the bundled Gemma 3 270M base model):
- `with_structured_output(method="function_calling")` works: the server turns the forced tool's JSON schema into
  a grammar, so the arguments always parse as JSON. The grammar ignores `minimum`/`maximum` (a score of 100
  comes back), so pass `bounded_json_schema(CritiqueOutput.model_json_schema())` (score as an enum 0..10) as a
  dict schema and validate the dict afterwards (or run it through `parse_critique`, which clamps).
- `method="json_schema"` is refused with HTTP 500 (`response_format.type` must be `text` or `json_object`).
- plain chat answers, but through the server's fallback chat template (`llama-2`) a base model tends to echo
  template debris; prompt it completion-style (the package prompts end with a cue line) and judge with tools.
- langchain-openai sends `max_completion_tokens`, which this server ignores; `resolve_model(..., base_url=...)`
  also sends `max_tokens` so replies stay bounded.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from reflection_graph.critique import CritiqueOutput, critique_tool_schema, parse_critique
from reflection_graph.models import critic_model, resolve_model, supports_structured_output
from reflection_graph.prompts import (
    CRITIQUE_PROMPT,
    CRITIQUE_SYSTEM,
    GENERATE_PROMPT,
    GENERATE_SYSTEM,
    render_prompt,
)
from tests._servers import llama_server

pytestmark = pytest.mark.server

EMAIL_TASK = "Write a polite email declining a job offer for the Data Engineer role at Acme"
DRAFT = (
    "Dear Acme hiring team,\n\nThank you for offering me the Data Engineer role. I have decided to decline the "
    "offer, as I have accepted another position.\n\nBest regards,\nSam"
)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with llama_server() as url:
        yield url


def _critique_messages() -> list[SystemMessage | HumanMessage]:
    prompt = render_prompt(CRITIQUE_PROMPT, {"task": EMAIL_TASK, "candidate": DRAFT})
    return [SystemMessage(content=CRITIQUE_SYSTEM), HumanMessage(content=prompt)]


def test_chat_openai_draft_round_trip(base_url: str) -> None:
    model = ChatOpenAI(
        base_url=base_url, api_key="x", model="gemma", temperature=0, extra_body={"max_tokens": 32}
    )
    prompt = render_prompt(GENERATE_PROMPT, {"task": EMAIL_TASK})
    reply = model.invoke([SystemMessage(content=GENERATE_SYSTEM), HumanMessage(content=prompt)])
    assert isinstance(reply.content, str) and reply.content.strip()
    usage = reply.usage_metadata
    assert usage is not None and usage["input_tokens"] > 20 and 0 < usage["output_tokens"] <= 32


def test_json_schema_method_is_refused_by_this_server(base_url: str) -> None:
    model = ChatOpenAI(
        base_url=base_url, api_key="x", model="gemma", temperature=0, extra_body={"max_tokens": 8}
    )
    with pytest.raises(openai.InternalServerError, match="json_object"):
        model.with_structured_output(CritiqueOutput, method="json_schema").invoke(_critique_messages())


def test_resolved_critic_gets_a_parsed_critique_through_function_calling(base_url: str) -> None:
    """The critic model `resolve_model` makes for a server answers the forced `CritiqueOutput` tool (the package's
    `critique_tool_schema`, what `LLMCritic` sends with function calling) with arguments that parse as a critique on
    the 0-10 scale. No branch accepts a reply that does not parse. With the pydantic schema's `maximum`, which this
    server's grammar ignores, Gemma scored 100 here and no critique parsed; the tool's score is an enum of 0-10,
    which the grammar keeps to."""
    model = resolve_model("gemma", role="critic", base_url=base_url)
    assert isinstance(model, ChatOpenAI)
    assert model.temperature == 0.0 and model.extra_body == {"max_tokens": 1024}
    assert supports_structured_output(model)
    critic = critic_model(model)
    result = critic.with_structured_output(
        critique_tool_schema(), method="function_calling", include_raw=True
    ).invoke(_critique_messages())
    raw = result["raw"]
    assert raw.tool_calls and raw.tool_calls[0]["name"] == "CritiqueOutput"
    args = raw.tool_calls[0]["args"]
    assert {"score", "is_acceptable"} <= set(args), args
    assert result["parsing_error"] is None, (args, result["parsing_error"])
    parsed = CritiqueOutput.model_validate(result["parsed"])  # the schema's own bounds, 0-10
    critique = parse_critique(args)  # raises CritiqueParseError (failing the test) on a score outside 0-10
    assert 0 <= critique.score <= 10 and critique.score == float(args["score"])
    assert critique.is_acceptable is parsed.is_acceptable is args["is_acceptable"]
    assert raw.usage_metadata is not None and raw.usage_metadata["output_tokens"] > 0


class BaseOnServer(ChatOpenAI):
    """Gemma 3 270M is a base model: behind a server it is declared completion-style, as docs/models.md says (a
    LangChain chat model that declares nothing is prompted through its chat template, and the task alone makes
    this base model stop at once)."""

    uses_chat_template: bool = False


def test_reflection_graph_end_to_end_through_chat_openai(base_url: str) -> None:
    """The whole loop on the production path: ChatOpenAI drafts (the base model declared completion-style), and
    the LLM critic (method "auto") falls back from the refused json_schema to function_calling and gets a parsed
    critique in every round."""
    from reflection_graph import create_reflection_graph

    generator = BaseOnServer(
        base_url=base_url, api_key="x", model="gemma", temperature=0.3, extra_body={"max_tokens": 64}
    )
    graph = create_reflection_graph(
        generator, critic="gemma", base_url=base_url, max_iterations=2, min_iterations=2, retries=0
    )
    result = graph.invoke({"task": EMAIL_TASK})
    assert result["stop_reason"] in ("accepted", "max_iterations", "plateau"), result["error"]
    assert result["iterations"] == 2
    for round_ in result["trajectory"]:
        assert round_["candidate"].strip()
        assert round_["critique"]["parsed"] is True and 0 <= round_["score"] <= 10
    assert result["usage"]["critique"]["calls"] >= 2 and result["usage"]["critique"]["total_tokens"] > 0
    assert result["usage"]["revise"]["calls"] == 1


class _MustNotFallBack:
    """A fallback critic that fails the test: the server returns logprobs, so the LogprobCritic must use them."""

    name = "must-not-fall-back"

    def critique(self, request: object, config: object = None) -> object:
        raise AssertionError("LogprobCritic fell back although the server returns logprobs")

    async def acritique(self, request: object, config: object = None) -> object:
        raise AssertionError("LogprobCritic fell back although the server returns logprobs")


def test_logprob_critic_reads_chat_completion_logprobs_from_the_server(base_url: str) -> None:
    """`logprobs=True, top_logprobs=K` on chat completions: the verdict comes from the server's next-token
    probabilities (the answer-likelihood signal is embedded-only), and a rejection gets a problem line."""
    import asyncio

    from reflection_graph.critics import CritiqueRequest, LogprobCritic

    model = resolve_model("gemma", role="critic", base_url=base_url)
    critic = LogprobCritic(model, fallback=_MustNotFallBack(), retries=0)  # type: ignore[arg-type]
    judge, messages = critic._judge_input(
        CritiqueRequest(task="What is the capital of France?", candidate="Paris.")
    )
    reply = judge.invoke(messages)
    top = reply.response_metadata["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) >= 2 and all(t["logprob"] <= 0 for t in top)
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] <= 2
    results = [
        critic.critique(CritiqueRequest(task="What is 12 x 12?", candidate="12 x 12 = 144.")),
        asyncio.run(critic.acritique(CritiqueRequest(task="What is 12 x 12?", candidate="12 x 12 = 124."))),
    ]
    for result in results:
        assert 0 <= result.score <= 10 and result.parsed
        assert result.is_acceptable == (result.score >= 5)
        assert result.is_acceptable or result.issues[0].strip()
    assert not critic._no_logprobs
