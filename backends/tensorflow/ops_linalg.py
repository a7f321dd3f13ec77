"""TensorFlow translation of :class:`toolkit.ops.linalg.LinalgOps`: the decompositions are ``tf.linalg``'s, with
their registered gradients (the products, :mod:`toolkit.ops.products`, are composites of the neutral layer)."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowLinalgOps:
    def _det(self, x):
        return tf.linalg.det(x)

    def _inv(self, x):
        return tf.linalg.inv(x)

    def _slogdet(self, x):
        sign, logabs = tf.linalg.slogdet(x)
        return sign, logabs

    def _solve(self, a, b):
        return tf.linalg.solve(a, b)

    def _solve_triangular(self, a, b, lower):
        return tf.linalg.triangular_solve(a, b, lower=lower)

    def _cholesky(self, x):
        return tf.linalg.cholesky(x)

    def _qr(self, x, complete):
        q, r = tf.linalg.qr(x, full_matrices=complete)
        return q, r

    def _svd(self, x, full_matrices, compute_uv):
        if not compute_uv:
            return tf.linalg.svd(x, full_matrices=full_matrices, compute_uv=False)
        s, u, v = tf.linalg.svd(x, full_matrices=full_matrices)  # TensorFlow returns v, NumPy and Keras its adjoint
        return u, s, tf.linalg.adjoint(v)

    def _eigh(self, x):
        w, v = tf.linalg.eigh(x)
        return w, v
