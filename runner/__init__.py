"""RankZero runner: runs PyTorch snippets (plain, DataParallel, DDP) in fresh sandboxes and judges them."""

__version__ = "0.1.0"
