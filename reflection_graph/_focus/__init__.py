"""What the `focus` setting changes in `generate`.

- `_messages`: the messages of a draft or a revision for each focus, and how a reply becomes a candidate;
- `_code`: the code focus: a function stub completed rather than restated (for base models), its docstring's
  examples as tests, and the tests file of the CLI and Studio;
- `_examples`: examples written as prose in a docstring (`f(3) ==> 9`), read as (call, expected value) pairs.

The names used outside this room are exported here: import them from `reflection_graph._focus`.
"""

from reflection_graph._focus._code import resolve_tests

__all__ = ["resolve_tests"]
