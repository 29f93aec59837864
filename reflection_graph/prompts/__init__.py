"""Named prompt templates, one per role. Fill them inside the node; override any of them per role.

Every template ends with a cue line ("Draft:", "JSON verdict:", "Revised answer:"). Instruction-tuned chat
models ignore it, and small *base* models (the embedded Gemma 3 270M) need it to start writing on topic.

Placeholders:
- GENERATE_PROMPT: {task}, {context}, {lessons}
- CRITIQUE_PROMPT: {task}, {context}, {candidate}, {threshold_rule}, {guidelines}
- JUDGE_PROMPT (the `LogprobCritic`'s few-shot yes/no question): {examples}, {task}, {context}, {candidate}
- LIKELIHOOD_PROMPT (the `LogprobCritic`'s likelihood signal): {task}, {context}, {candidate}
- PAIRWISE_PROMPT (the `PairwiseCritic`'s question, asked in both orders): {task}, {context}, {a}, {b}
- CHAT_VERDICT_PROMPT, CHAT_PREFERENCE_PROMPT, CHAT_CRITIQUE_PROMPT (the `JudgeCritic`'s questions to an
  instruction-tuned model, sent through its chat template): {task}, {context}, and {candidate} or {a}, {b}
- CHAT_FAULT_PROMPT, CHAT_NO_FAULT_PROMPT (the `JudgeCritic`'s check of one written fault): {task}, {context},
  {candidate}, {fault}
- CHAT_FAULT_CHOICE_PROMPT (the same check as a choice, `confirm="choice"`): {task}, {context}, {candidate},
  {fault}, {a}, {b}
- REVISE_PROMPT: {task}, {context}, {candidate}, {critique}, {history}, {preserve_rule}, {focus}
- CHAT_REVISE_PROMPT (a revision by a model prompted through its chat template, after its own answer):
  {critique}, {preserve_rule}, {focus}
- FRESH_DRAFT_PROMPT (a fresh draft told an earlier answer's faults, after the user's request): {request}, {faults}

The templates are in `_templates` and the functions that fill them into requests in `_requests`; every name is
exported here.
"""

from reflection_graph.prompts._requests import HISTORY_CHARS as HISTORY_CHARS  # the loop's, not public
from reflection_graph.prompts._requests import (
    draft_messages,
    format_critique,
    fresh_draft_request,
    plain_request,
    render_prompt,
    revise_messages,
)
from reflection_graph.prompts._templates import (
    CHAT_ANSWER_OPENING,
    CHAT_CRITIQUE_PROMPT,
    CHAT_CRITIQUE_SYSTEM,
    CHAT_FAULT_CHOICE_PROMPT,
    CHAT_FAULT_PROMPT,
    CHAT_NO_FAULT_PROMPT,
    CHAT_PREFERENCE_PROMPT,
    CHAT_REVISE_PROMPT,
    CHAT_VERDICT_PROMPT,
    CRITIQUE_PROMPT,
    CRITIQUE_SYSTEM,
    CUE_LINES,
    FAULT_HELD,
    FAULT_NOT_HELD,
    FOCUS_CUES,
    FOCUS_PROMPTS,
    FRESH_DRAFT_PROMPT,
    GENERATE_PROMPT,
    GENERATE_SYSTEM,
    JUDGE_EXAMPLES,
    JUDGE_PROMPT,
    LIKELIHOOD_PROMPT,
    PAIRWISE_PROMPT,
    PRESERVE_CORRECT_RULE,
    REVISE_PROMPT,
    REVISE_SYSTEM,
    THRESHOLD_RULE,
    PromptOverride,
)

__all__ = [
    "CHAT_ANSWER_OPENING",
    "CHAT_CRITIQUE_PROMPT",
    "CHAT_CRITIQUE_SYSTEM",
    "CHAT_FAULT_CHOICE_PROMPT",
    "CHAT_FAULT_PROMPT",
    "CHAT_NO_FAULT_PROMPT",
    "CHAT_PREFERENCE_PROMPT",
    "CHAT_REVISE_PROMPT",
    "CHAT_VERDICT_PROMPT",
    "CRITIQUE_PROMPT",
    "CRITIQUE_SYSTEM",
    "CUE_LINES",
    "FAULT_HELD",
    "FAULT_NOT_HELD",
    "FOCUS_CUES",
    "FOCUS_PROMPTS",
    "FRESH_DRAFT_PROMPT",
    "GENERATE_PROMPT",
    "GENERATE_SYSTEM",
    "JUDGE_EXAMPLES",
    "JUDGE_PROMPT",
    "LIKELIHOOD_PROMPT",
    "PAIRWISE_PROMPT",
    "PRESERVE_CORRECT_RULE",
    "REVISE_PROMPT",
    "REVISE_SYSTEM",
    "THRESHOLD_RULE",
    "PromptOverride",
    "draft_messages",
    "format_critique",
    "fresh_draft_request",
    "plain_request",
    "render_prompt",
    "revise_messages",
]
