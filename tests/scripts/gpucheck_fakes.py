"""For the gpucheck tests (import it after putting scripts/ on sys.path): a test case with a Check
whose logs folder is a fresh temporary one."""
import os
import tempfile
import unittest

from gpucheck.clock import Clock
from gpucheck.context import Check
from gpucheck.table import Report


class LogsTestCase(unittest.TestCase):
    """self.check: a --cpu Check with its logs in a temporary folder; self.write fills a log."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.folder = tmp.name
        self.check = Check(mode="cpu", binary="/bin/false", logs=tmp.name, scratch=tmp.name,
                           clock=Clock(420, 480), report=Report("cpu"))

    def write(self, name, text):
        """Writes `text` as logs/NAME."""
        with open(os.path.join(self.folder, name), "w") as f:
            f.write(text)
