"""Helpers of the client tests (NOTE [Client tests] in tests/CMakeLists.txt): they run in the
pinned environment of python/requirements.txt and reuse the end-to-end tests' helpers."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from common import BINARY, first_difference, run, token_stream  # noqa: E402,F401


def relative(a, b):
    return abs(a - b) / abs(b)
