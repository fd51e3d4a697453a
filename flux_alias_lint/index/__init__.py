"""The project index: which functions Megatron's schedule (or an in-place caller) really calls.

`project.py` (the index, `ProjectIndex`) is built of: `files.py` (a project's root, its Python
files, the file a module name imports), `gates.py` (the byte-level gate), `modules.py` (the modules
read, parsed once each, and what each file's evidence depends on), `symbols.py` (the one symbol
table of a module: its imports and defs, also read by the library and the triage), `resolve.py`
(the functions an expression names), and the evidence of the hand-offs in `handoffs.py` (the
table): `schedule.py`, `following.py` and `in_place.py`. `reach.py` holds what is found (`Reach`,
`Step`, the contexts); `nodes.py` the readings of `ast` nodes they share. Apart from the index,
`escapes.py` follows an unreached function's value through the references `references.py` finds.
"""
