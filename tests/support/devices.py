"""The devices the torch-only tests run on: cpu always, cuda when torch sees one (skipped otherwise)."""

import pytest
import torch

CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA device"))]
