"""A user's map-style dataset for bench/python_dataset_pil.py: class
folders of JPEGs, each item decoded with PIL in __getitem__ (as
torchvision's ImageFolder loads it), returned as a numpy array and its
label."""

import os

import numpy as np
from PIL import Image


class PilPhotos:
    def __init__(self, root):
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.items = [(os.path.join(root, c, f), label) for label, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with open(path, "rb") as f:
            image = Image.open(f).convert("RGB")
        return np.asarray(image), label
