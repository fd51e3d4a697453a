"""Facts only, written once as data: no tree library, no interpreter state.

- `tensor_ops`: which torch operations alias their input, and which write it in place.
- `storage`: what each Python builtin and container method does to storage.
- `reports`: the shapes of a loss function's return, what a kept value is, what an in-place rescale is.
- `policy`: how far the interpreters follow calls (summary depth and size).

The analysis and the triage both read these tables; `tests/test_facts.py` checks each row has a
transfer in both.
"""
