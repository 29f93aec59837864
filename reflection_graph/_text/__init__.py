"""Reading text: pure functions over strings, no model and no settings, used by critics, nodes and selection.

- `_extract`: the one extractor of code fences, code and JSON from model replies;
- `_lines`: lines a person reads: whole sentences in the task's script;
- `_placeholders`: template placeholders (`[Your Name]`, `<name>`, `{name}`) in prose, and the ones a
  candidate brought in;
- `_rule_revision`: the placeholder rule as a reviser (a slot written out or left out, a letter never left on a
  bare sign-off), and its fix as concrete edits that quote the lines they change.

This file imports nothing, so importing one of them never loads the others.
"""
