"""The dump writer, as mlaverify.dump: the same module as the standalone mlaverify_dump package
(python/mlaverify_dump), kept importable under both names."""

from mlaverify_dump import *  # noqa: F401,F403
from mlaverify_dump import (DumpError, PRESETS, from_sglang, maybe_dump_sglang,  # noqa: F401
                            preset_sm_scale, read_verify_dump, write_verify_dump)
from mlaverify_dump import synth  # noqa: F401
