"""W2's blur as a user writes it with OpenCV, for bench/python_ops_w2.py."""

import cv2

cv2.setNumThreads(1)  # each process of the pool is one worker


def blur(sample):
    return {"image": cv2.GaussianBlur(sample["image"], (11, 11), 0.8)}


class GaussianBlur:
    """The same blur as a transform object holding its sigma, as
    torchvision's take an image: ops.python(GaussianBlur(0.8), column="image")."""

    def __init__(self, sigma):
        self.sigma = sigma

    def __call__(self, image):
        return cv2.GaussianBlur(image, (11, 11), self.sigma)
