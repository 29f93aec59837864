"""Reading text: pure functions over strings, no model and no settings, used by critics, nodes and selection.

- `_extract`: the one extractor of code fences, code and JSON from model replies;
- `_lines`: lines a person reads: whole sentences in the task's script;
- `_placeholders`: template placeholders (`[Your Name]`, `<name>`, `{name}`) in prose, and the ones a
  candidate brought in;
- `_rule_revision`: the placeholder rule as a reviser (a slot written out or left out, a letter never left on a
  bare sign-off), and its fix as concrete edits that quote the lines they change.

The names the rest of the package uses are exported here: import them from `reflection_graph._text`, not from
its modules (which import nothing of the package outside this room).
"""

from reflection_graph._text._extract import (
    PYTHON_TAGS,
    extract_code,
    extract_json_object,
    extract_json_text,
    fenced_blocks,
    first_json_value,
    is_python,
    parse_python,
    well_formed,
)
from reflection_graph._text._lines import script_of, scripts, whole_line
from reflection_graph._text._placeholders import inline_placeholders, introduced_placeholders
from reflection_graph._text._rule_revision import bare_sign_off, placeholder_edits, rule_revision

__all__ = [
    "PYTHON_TAGS",
    "bare_sign_off",
    "extract_code",
    "extract_json_object",
    "extract_json_text",
    "fenced_blocks",
    "first_json_value",
    "inline_placeholders",
    "introduced_placeholders",
    "is_python",
    "parse_python",
    "placeholder_edits",
    "rule_revision",
    "script_of",
    "scripts",
    "well_formed",
    "whole_line",
]
