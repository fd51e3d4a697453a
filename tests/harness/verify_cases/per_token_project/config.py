# The project turns Megatron's per-token loss on where it builds its model config.
from megatron.core.transformer import TransformerConfig


def model_config(**kwargs):
    return TransformerConfig(calculate_per_token_loss=True, **kwargs)
