"""The layer every model call goes through: retries and timeouts, the run's budget, the count of calls and
tokens.

- `_calls`: `call` / `acall`, the one retry/timeout layer (empty replies too), and `max_model_calls`;
- `_budget`: a run's token and time budget, which admits each call and cuts its reply limit to what is left;
- `_usage`: calls, tokens and seconds per role (the meter `_calls` records into, and the callback that measures
  critics whose calls do not go through `_calls`);
- `_estimate`: a call's tokens, as the model reports them or estimated, and the most a call can use;
- `_threads`: blocking calls and streamed replies in their own daemon threads, so nothing abandoned keeps the
  event loop or the process waiting.

Nodes, critics and models import these modules directly; this file imports nothing, so importing one of them
never loads the others.
"""
