import os
import sys

# Test the source tree (python/), not a possibly stale installed copy; test_installed_copy checks
# that what scripts/venv.sh installed is the same version. MLAV_TEST_INSTALLED=1 tests the
# installed package instead (scripts/device_python.sh, after its pip install).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("MLAV_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
