import torch
import torch.nn as nn


class Model(nn.Module):
    """KL divergence between two row-wise distributions, batchmean reduction."""
    # est. H100 eager: ~1.2 ms (log, target log, pointwise KL and sum: ~8 passes over 2^27 floats)

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


BATCH_SIZE = 4096
DIM = 32768


def get_inputs():
    return [torch.rand(BATCH_SIZE, DIM).softmax(dim=-1), torch.rand(BATCH_SIZE, DIM).softmax(dim=-1)]


def get_init_inputs():
    return []
