"""Source snippets shaped like what Megatron is handed, shared by the command-line tests."""

# A forward step with Megatron's signature that returns `loss_func`: appended to a test's loss
# function, it makes its findings proven (context `megatron`, so errors that fail the run) without
# moving their lines. Without it a lone loss function is `unreached`: a warning.
FORWARD_STEP = "\n\ndef forward_step(data_iterator, model):\n    return model(next(data_iterator)), loss_func\n"
