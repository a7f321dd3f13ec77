"""Data that needs no download: scikit-learn's bundled handwritten digits, and seeded synthetic sets for the
built-in CNN, Transformer and LSTM models (each recipe documented where it is made)."""

from __future__ import annotations

import numpy as np

#: Share of the digits held out for testing.
DIGITS_TEST_FRACTION = 0.2


def digits(seed: int = 0, test_fraction: float = DIGITS_TEST_FRACTION):
    """The 1,797 8x8 handwritten digits of ``sklearn.datasets.load_digits``, flattened to 64 pixels in [0, 1].

    Args:
        seed: the seed of the shuffle before the split.
        test_fraction: the share of the examples held out for testing (rounded to whole examples).

    Returns:
        ``(x_train, y_train, x_test, y_test)``: float64 ``[n, 64]`` pixels and int64 labels 0..9.

    Raises:
        ImportError: scikit-learn is not installed (the message gives the ``pip`` command).
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:
        raise ImportError('the digits data needs scikit-learn: pip install "scikit-learn"') from error
    data = load_digits()
    x, y = data.data / 16.0, data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = int(round(len(x) * test_fraction))
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def _split(x, y, test_fraction: float):
    n_test = int(round(len(x) * test_fraction))
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def synthetic_images(examples: int = 1200, size: int = 32, classes: int = 10, seed: int = 0,
                     test_fraction: float = DIGITS_TEST_FRACTION):
    """Seeded ``[examples, size, size, 3]`` float images of ``classes`` oriented stripe patterns (for the ResNet).

    Recipe: class ``c`` has stripes at angle ``pi * c / classes`` and ``2 + c % 3`` periods across the image; each
    example draws a phase per colour channel uniformly in ``[0, 2 pi)`` and adds Gaussian noise of deviation 0.5::

        pixel[i, j, k] = sin(2 pi f (i cos a + j sin a) / size + phase_k) + noise

    Args:
        examples: the number of images, train and test together.
        size: the images' height and width.
        classes: the number of stripe orientations (labels ``0..classes-1``).
        seed: the seed of every draw.
        test_fraction: the share of the examples held out for testing.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: float64 ``[n, size, size, 3]`` images and int64 labels.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=examples)
    angle = np.pi * labels / classes
    frequency = 2 + labels % 3
    i, j = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    along = (i[None] * np.cos(angle)[:, None, None] + j[None] * np.sin(angle)[:, None, None]) / size
    phase = rng.uniform(0, 2 * np.pi, size=(examples, 1, 1, 3))
    images = np.sin(2 * np.pi * frequency[:, None, None, None] * along[..., None] + phase)
    images += rng.normal(scale=0.5, size=images.shape)
    return _split(images, labels.astype(np.int64), test_fraction)


def zen_corpus(seq_len: int = 32, examples: int = 1200, seed: int = 0, test_fraction: float = DIGITS_TEST_FRACTION):
    """Character-level language-model windows of the Zen of Python (the text of ``import this``, part of every
    Python since 2.2, unchanged since): byte ids 0..127, ``examples`` windows of ``seq_len + 1`` characters at
    seeded random starts; ``x`` is a window's first ``seq_len`` ids, ``y`` the next ones.

    Args:
        seq_len: the length of an input window.
        examples: the number of windows, train and test together.
        seed: the seed of the windows' starts.
        test_fraction: the share of the windows held out for testing.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: int64 ids, each ``[n, seq_len]``.
    """
    text = _zen_of_python().encode("ascii")
    ids = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
    starts = np.random.default_rng(seed).integers(0, len(ids) - seq_len - 1, size=examples)
    windows = np.stack([ids[s:s + seq_len + 1] for s in starts])
    return _split(windows[:, :-1], windows[:, 1:], test_fraction)


def _zen_of_python() -> str:
    """The Zen of Python, read from the source of the ``this`` module (importing it would print the text): its
    rot13-encoded string ``s``, decoded."""
    import ast
    import codecs
    import importlib.util
    import pathlib

    tree = ast.parse(pathlib.Path(importlib.util.find_spec("this").origin).read_text(encoding="utf-8"))
    encoded = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", None) == "s")
    return codecs.decode(encoded, "rot13")


def synthetic_sequences(examples: int = 1200, seq_len: int = 20, vocab: int = 32, seed: int = 0,
                        test_fraction: float = DIGITS_TEST_FRACTION):
    """Seeded variable-length token sequences padded with 0 (for the masked LSTM classifier).

    Recipe: each sequence has a length uniform in ``[seq_len // 4, seq_len]`` and tokens uniform in
    ``1..vocab-1``, the rest of the row 0 (padding after the end); its label is 1 when more than half of its tokens
    are in the lower half ``1..vocab // 2``, else 0. Only a model that skips the padding counts right.

    Args:
        examples: the number of sequences, train and test together.
        seq_len: the padded length of a sequence.
        vocab: the number of token ids, 0 being padding.
        seed: the seed of every draw.
        test_fraction: the share of the sequences held out for testing.

    Returns:
        ``(x_train, y_train, x_test, y_test)``: int64 ids ``[n, seq_len]`` and int64 labels 0 or 1.
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq_len // 4, seq_len + 1, size=examples)
    tokens = rng.integers(1, vocab, size=(examples, seq_len))
    inside = np.arange(seq_len)[None, :] < lengths[:, None]
    ids = np.where(inside, tokens, 0)
    low = ((ids >= 1) & (ids <= vocab // 2)).sum(axis=1)
    return _split(ids, (2 * low > lengths).astype(np.int64), test_fraction)
