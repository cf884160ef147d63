import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of 1 - cosine similarity between matching rows."""
    # est. H100 eager: ~1.5 ms (reads both 1 GiB inputs ~2 times (dot and norms))

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        cosine_sim = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine_sim)


BATCH_SIZE = 32768
DIM = 8192


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM), torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
