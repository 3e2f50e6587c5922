"""mlaverify_dump: write MLA target-verify attention calls as mlaverify dumps.

    from mlaverify_dump import write_verify_dump, from_sglang, maybe_dump_sglang

See python/README.md for the format and where to call it in SGLang.
"""

__version__ = "0.1.0"

from .presets import PRESETS, preset_sm_scale  # noqa: E402
from .writer import DumpError, read_verify_dump, write_verify_dump  # noqa: E402
from .sglang import from_sglang, maybe_dump_sglang  # noqa: E402

__all__ = ["write_verify_dump", "read_verify_dump", "from_sglang", "maybe_dump_sglang",
           "DumpError", "PRESETS", "preset_sm_scale", "__version__"]
