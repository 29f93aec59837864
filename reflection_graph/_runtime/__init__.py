"""The layer every model call goes through: retries and timeouts, the run's budget, the count of calls and
tokens.

- `_calls`: `call` / `acall`, the one retry/timeout layer (empty replies too), and `max_model_calls`;
- `_errors`: what a failed call is to it: transient (retried), a time-out, an empty reply, or permanent;
- `_budget`: a run's token and time budget, which admits each call and cuts its reply limit to what is left;
- `_usage`: calls, tokens and seconds per role (the meter `_calls` records into, and the callback that measures
  critics whose calls do not go through `_calls`);
- `_estimate`: a call's tokens, as the model reports them or estimated, and the most a call can use.

It sits under critics and the loop and over `models` and `settings`, and imports neither critics nor the loop (the
daemon threads blocking calls run in are `models`' own: `run_detached`). The names the rest of the package uses
are exported here: import them from `reflection_graph._runtime`, not from its modules.
"""

from reflection_graph._runtime._budget import BudgetExhausted, current_budget, step_budget
from reflection_graph._runtime._calls import acall, call, max_model_calls, sampled
from reflection_graph._runtime._errors import is_transient
from reflection_graph._runtime._usage import (
    Meter,
    RoleUsage,
    add_role_usage,
    empty_usage,
    merge_usage,
    metering,
    run_usage,
    sum_usage,
    track_usage,
    with_total,
)

__all__ = [
    "BudgetExhausted",
    "Meter",
    "RoleUsage",
    "acall",
    "add_role_usage",
    "call",
    "current_budget",
    "empty_usage",
    "is_transient",
    "max_model_calls",
    "merge_usage",
    "metering",
    "run_usage",
    "sampled",
    "step_budget",
    "sum_usage",
    "track_usage",
    "with_total",
]
