"""A 1 GB in-memory dataset as the DataLoader memory complaint has it (torch
issue 13246): many small Python objects, here 2 KiB bytes objects, whose
reference counts a forked worker's reads write to, copying their pages.
For bench/python_dataset_memory.py; numpy only, so it imports under
Debian's /usr/bin/python3 and the venv alike."""

import numpy as np


class ManyBlobs:
    def __init__(self, items, item_bytes):
        self.blobs = [bytes([i % 251]) * item_bytes for i in range(items)]  # distinct objects

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, i):
        return np.frombuffer(self.blobs[i], np.uint8), i
