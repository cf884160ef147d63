import torch
import torch.nn as nn


class Model(nn.Module):
    """Smooth L1 (Huber, beta 1) loss, mean reduction."""
    # est. H100 eager: ~1.3 ms (elementwise loss (3 GiB moved) then mean (1 GiB) over 2^28 floats)

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)


BATCH_SIZE = 4096
DIM = 65536


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM), torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
