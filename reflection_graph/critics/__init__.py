"""Critics: the `Critic` protocol, the LLM critic, the token-probability, pairwise and judge critics, and critics that
need no model (tests, rules, and IFEval/IFBench verifiable instructions)."""

from reflection_graph.critics.base import BaseCritic, Critic, CritiqueRequest, InlineCritic, ModelCritic
from reflection_graph.critics.code_tests import (
    CodeTestCritic,
    CommandCritic,
    IsolationUnavailableError,
    extract_code,
)
from reflection_graph.critics.composite import CompositeCritic
from reflection_graph.critics.instructions import InstructionCritic, InstructionUnavailableError
from reflection_graph.critics.judge import JudgeCritic
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critics.logprob import LogprobCritic
from reflection_graph.critics.pairwise import PairwiseCritic
from reflection_graph.critics.rules import JSONSchemaCritic, LengthCritic, RequiredTermsCritic, RuleCritic

__all__ = [
    "BaseCritic",
    "CodeTestCritic",
    "CommandCritic",
    "CompositeCritic",
    "Critic",
    "CritiqueRequest",
    "InlineCritic",
    "InstructionCritic",
    "InstructionUnavailableError",
    "IsolationUnavailableError",
    "JSONSchemaCritic",
    "JudgeCritic",
    "LLMCritic",
    "LengthCritic",
    "LogprobCritic",
    "ModelCritic",
    "PairwiseCritic",
    "RequiredTermsCritic",
    "RuleCritic",
    "extract_code",
]
