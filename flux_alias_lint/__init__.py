"""flux-alias-lint: find and fix loss-function reports that alias Megatron's backprop tensor."""

__version__ = "0.1.0"
