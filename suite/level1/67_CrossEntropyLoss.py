import torch
import torch.nn as nn


class Model(nn.Module):
    """Cross-entropy of logits against integer class targets (mean over the batch)."""
    # est. H100 eager: ~2.0 ms (log_softmax over 2^29 floats (3 passes) then a gather)

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


BATCH_SIZE = 131072
NUM_CLASSES = 4096


def get_inputs():
    return [torch.randn(BATCH_SIZE, NUM_CLASSES), torch.randint(0, NUM_CLASSES, (BATCH_SIZE,))]


def get_init_inputs():
    return []
