"""Shared test configuration. Tests import the installed httpbench, never the source tree."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Keep the source package off sys.path so tests exercise the installed build.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "python")]
