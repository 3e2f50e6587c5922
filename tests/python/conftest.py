import os
import sys

# Test the source tree (python/), not a possibly stale installed copy; test_installed_copy checks
# that what scripts/venv.sh installed is the same version.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
