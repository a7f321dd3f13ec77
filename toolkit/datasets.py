"""Real data that needs no download: scikit-learn's bundled handwritten digits."""

from __future__ import annotations

import numpy as np

#: Share of the digits held out for testing.
DIGITS_TEST_FRACTION = 0.2


def digits(seed: int = 0, test_fraction: float = DIGITS_TEST_FRACTION):
    """The 1,797 8x8 handwritten digits of ``sklearn.datasets.load_digits``, flattened to 64 pixels in [0, 1].

    Returns:
        ``(x_train, y_train, x_test, y_test)``: float64 pixels and int64 labels 0..9, shuffled with ``seed``.
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
