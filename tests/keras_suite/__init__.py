"""Keras' own op tests run against the toolkit's ops (issue 27): ``python -m tests.keras_suite --backend NAME``.

The Keras sdist of the installed version is downloaded at test time (:mod:`.sdist`), its op correctness tests are
run by pytest with ``keras.ops`` replaced by the toolkit's ops on one backend (:mod:`.replacement`, :mod:`.plugin`),
and each test is counted as passed, failed, refused, not covered or out of scope, per op and in all
(:mod:`.report`). No file here is a pytest test module: the repository's own test run does not collect the suite.
"""
