"""Tests of the Python dump writer (mlaverify_dump) and the batch synthesizer.

Run: .venv/bin/python -m pytest tests/python   (scripts/venv.sh makes .venv)
"""

import filecmp
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors import safe_open

from conftest import ROOT
from mlaverify_dump import (PRESETS, DumpError, __version__, from_sglang, maybe_dump_sglang,
                            read_verify_dump, write_verify_dump)
from mlaverify_dump._bf16 import bits_to_f32, round_bf16, to_bf16_bits
from mlaverify_dump.reference import reference_attention, rel_frobenius, request_visibility
from mlaverify_dump.synth import build_batch, synthesize, tree_visibility

# The two SGLang dumps ship in the repository (scenarios/dumps); MLAVERIFY_SHARED_DUMPS points
# elsewhere if wanted.
SHARED_DUMPS = os.environ.get("MLAVERIFY_SHARED_DUMPS", os.path.join(ROOT, "scenarios", "dumps"))

# bf16 keeps 8 significant bits, so rounding to nearest moves a value by at most half an ulp:
# |x - bf16(x)| <= 2^-8 |x| per element. A kernel that computes o exactly and only rounds its
# output therefore has ||o - ref||_F^2 = sum (o_k - ref_k)^2 <= 2^-16 sum ref_k^2, i.e.
# ||o - ref||_F / ||ref||_F <= 2^-8 ~ 3.9e-3. The fp32 accumulation and the rounding of P inside
# a real kernel add terms orders of magnitude smaller at these sizes; we use 4e-3.
BF16_OUT_REL_FROB = 4e-3

EXPECT_DTYPES = {"q": "BF16", "kv_buffer": "BF16", "k_extend": "BF16", "o": "BF16", "lse": "F32",
                 "qo_indptr": "I32", "kv_indptr": "I32", "kv_indices": "I64", "custom_mask": "BOOL",
                 "mask_indptr": "I64", "seq_lens": "I64", "req_pool_indices": "I64",
                 "req_to_token": "I32", "positions": "I64", "out_cache_loc": "I64"}


def small_batch(seed=0, prefixes=(0, 1, 64, 65), D=4, H=8, preset="kimi-k2", pad_to=None):
    rng = np.random.default_rng(seed)
    t, meta = build_batch(rng, preset=preset, H=H, prefixes=list(prefixes), D=D, pad_to=pad_to)
    o, lse = reference_attention(t, meta["sm_scale"], requests=range(meta["raw_bs"]))
    n = int(t["qo_indptr"][meta["raw_bs"]])
    o[n:] = 0.0
    lse[n:] = 0.0
    return t, meta, round_bf16(o), lse.astype(np.float32)


def write_small(path, t, meta, o, lse, **kw):
    args = dict(t, o=o, lse=lse, preset=meta["preset"], tp=meta["tp"], raw_bs=meta["raw_bs"],
                parents=meta["parents"], float_dtype="bf16")
    args.update(kw)
    return write_verify_dump(path, **args)


# ---------------------------------------------------------------- bf16


def test_bf16_rounding():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5, 0.0, -0.0, np.inf, -np.inf, 3.4e38])
    assert to_bf16_bits(x).tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0, 0x8000, 0x7F80,
                                        0xFF80, 0x7F80]
    # float64 just above a tie: float32 lands on the tie, rounding it again would go to even (down)
    assert to_bf16_bits(np.array([1 + 2 ** -8 + 2 ** -30]))[0] == 0x3F81
    assert to_bf16_bits(np.array([-(1 + 2 ** -8 + 2 ** -30)]))[0] == 0xBF81
    assert np.isnan(bits_to_f32(to_bf16_bits(np.array([np.nan]))))[0]
    # every bf16 value survives the round trip; the error bound 2^-8 |x| holds on random data
    allbits = np.arange(0, 1 << 16, dtype=np.uint16)
    finite = np.isfinite(bits_to_f32(allbits))
    assert (to_bf16_bits(bits_to_f32(allbits)[finite]) == allbits[finite]).all()
    r = np.random.default_rng(3).standard_normal(100000) * 10.0 ** np.random.default_rng(4).integers(-20, 20, 100000)
    assert (np.abs(round_bf16(r) - r) <= 2.0 ** -8 * np.abs(r)).all()


def test_bf16_matches_ml_dtypes_when_present():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    r = np.random.default_rng(5).standard_normal(100000).astype(np.float32)
    ours = to_bf16_bits(r)
    theirs = r.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert (ours == theirs).all()


# ---------------------------------------------------------------- write_verify_dump


def test_round_trip(tmp_path):
    t, meta, o, lse = small_batch()
    path = str(tmp_path / "d.safetensors")
    written = write_small(path, t, meta, o, lse)
    # read back with safetensors itself: names, dtypes, shapes, metadata
    with safe_open(path, framework="numpy") as f:
        assert sorted(f.keys()) == sorted(EXPECT_DTYPES)
        for name, dt in EXPECT_DTYPES.items():
            sl = f.get_slice(name)
            assert sl.get_dtype() == dt, name
            want = t[name].shape if name in t else (o.shape if name == "o" else lse.shape)
            assert tuple(sl.get_shape()) == tuple(want), name
        md = f.metadata()
    assert md == written
    T, H = t["q"].shape[:2]
    bs = t["seq_lens"].shape[0]
    assert md["preset"] == "kimi-k2" and md["tp"] == "8" and md["heads"] == str(H)
    assert abs(float(md["sm_scale"]) - 0.1308608) < 1e-7
    assert md["page_size"] == "1" and md["layout"] == "latent-first"
    assert md["bs"] == str(bs) and md["raw_bs"] == str(bs) and md["draft_tokens"] == "4"
    assert json.loads(md["parents"]) == meta["parents"]
    assert md["producer"].startswith("mlaverify_dump")
    # values: bf16 exactly as given, integers and the mask unchanged
    tensors, dtypes, md2 = read_verify_dump(path)
    assert md2 == md and dtypes == EXPECT_DTYPES
    for name, a in t.items():
        assert np.array_equal(tensors[name], a), name
    assert np.array_equal(tensors["o"], o) and np.array_equal(tensors["lse"], lse)
    # the header is what the format says: u64 length, JSON, 8-byte aligned buffer
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    ends = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    assert ends[0][0] == 0 and ends[-1][1] == len(raw) - 8 - n
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))


def test_optional_tensors_and_dtypes_kept(tmp_path):
    t, meta, o, lse = small_batch()
    path = str(tmp_path / "d.safetensors")
    u = dict(t)
    del u["k_extend"]
    u["q"] = t["q"].astype(np.float32)  # fp32 and int32 kept as given without float_dtype
    u["kv_buffer"] = t["kv_buffer"].astype(np.float16)
    u["kv_indices"] = t["kv_indices"].astype(np.int32)
    write_verify_dump(path, **u, sm_scale=0.125)
    tensors, dtypes, md = read_verify_dump(path)
    assert "k_extend" not in tensors and "o" not in tensors and "lse" not in tensors
    assert dtypes["q"] == "F32" and dtypes["kv_buffer"] == "F16" and dtypes["kv_indices"] == "I32"
    assert "preset" not in md and md["sm_scale"] == "0.125"


def test_ml_dtypes_bfloat16_input(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t, meta, o, lse = small_batch()
    u = dict(t, q=t["q"].astype(ml_dtypes.bfloat16))
    write_verify_dump(str(tmp_path / "d.safetensors"), **u, preset="kimi-k2", float_dtype="bf16")
    tensors, dtypes, _ = read_verify_dump(str(tmp_path / "d.safetensors"))
    assert dtypes["q"] == "BF16" and np.array_equal(tensors["q"], t["q"])


def test_torch_input(tmp_path):
    torch = pytest.importorskip("torch")
    t, meta, o, lse = small_batch()
    u = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in t.items()}
    for k in ("q", "kv_buffer", "k_extend"):
        u[k] = u[k].to(torch.bfloat16)
    write_verify_dump(str(tmp_path / "d.safetensors"), **u,
                      o=torch.from_numpy(o).to(torch.bfloat16), preset="kimi-k2")
    tensors, dtypes, _ = read_verify_dump(str(tmp_path / "d.safetensors"))
    assert dtypes["q"] == "BF16" and np.array_equal(tensors["q"], t["q"])
    assert np.array_equal(tensors["o"], o)


def bad(tmp_path, match, **changes):
    t, meta, o, lse = small_batch()
    args = dict(t, o=o, lse=lse, preset="kimi-k2", float_dtype="bf16")
    args.update(changes)
    with pytest.raises(DumpError, match=match):
        write_verify_dump(str(tmp_path / "bad.safetensors"), **args)
    assert not os.path.exists(tmp_path / "bad.safetensors")


def test_rejects_bad_shapes(tmp_path):
    t, meta, o, lse = small_batch()
    T, H = t["q"].shape[:2]
    bad(tmp_path, r"q: expected shape \[T, H, 576\]", q=t["q"][:, :, :512])
    bad(tmp_path, r"q: expected shape", q=t["q"].reshape(T, -1))
    bad(tmp_path, r"kv_buffer: expected shape", kv_buffer=t["kv_buffer"][:, :, :512])
    bad(tmp_path, r"k_extend: expected shape", k_extend=t["k_extend"][1:])
    bad(tmp_path, r"o: expected shape \[%d, %d, 512\]" % (T, H), o=o[:, :, :576 - 64 - 1])
    bad(tmp_path, r"lse: expected shape", lse=lse[:, :1])
    bad(tmp_path, r"qo_indptr: expected 5 entries", qo_indptr=t["qo_indptr"][:-1])
    bad(tmp_path, r"qo_indptr\[4\] = %d but q has %d" % (T - 1, T),
        qo_indptr=np.minimum(t["qo_indptr"], T - 1))
    bad(tmp_path, r"kv_indptr\[4\] = .* but kv_indices has", kv_indices=t["kv_indices"][:-1])
    bad(tmp_path, r"mask_indptr decreases at index 2",
        mask_indptr=np.array([0, 40, 30, 500, len(t["custom_mask"])]))
    bad(tmp_path, r"mask_indptr\[0\] = 3", mask_indptr=t["mask_indptr"] + 3)
    bad(tmp_path, r"qo_indptr: request 1 has no draft token",
        qo_indptr=np.array([0, 8, 8, 12, T]))
    bad(tmp_path, r"req_pool_indices: expected 4 entries", req_pool_indices=t["req_pool_indices"][:3])
    bad(tmp_path, r"positions: expected %d entries" % T, positions=t["positions"][:-1])
    bad(tmp_path, r"req_to_token: expected 2-D", req_to_token=t["req_to_token"].ravel())


def test_rejects_bad_values_and_metadata(tmp_path):
    t, meta, o, lse = small_batch()
    N = t["kv_buffer"].shape[0]
    ki = t["kv_indices"].copy()
    ki[5] = N
    bad(tmp_path, r"kv_indices\[5\] = %d is outside \[0, %d\)" % (N, N), kv_indices=ki)
    ocl = t["out_cache_loc"].copy()
    ocl[2] = -1
    bad(tmp_path, r"out_cache_loc\[2\] = -1", out_cache_loc=ocl)
    bad(tmp_path, r"req_pool_indices\[0\] = 99", req_pool_indices=np.array([99, 1, 2, 3]))
    bad(tmp_path, r"expected an integer tensor", kv_indices=t["kv_indices"].astype(np.float32))
    bad(tmp_path, r"expected a floating tensor", q=t["q"].astype(np.int32))
    bad(tmp_path, r"float64 is not a kernel dtype", float_dtype=None)
    bad(tmp_path, r"give sm_scale .* or a preset", preset=None)
    bad(tmp_path, r"unknown preset 'kimi-k3'", preset="kimi-k3")
    bad(tmp_path, r"raw_bs = 5 must be in \[0, bs = 4\]", raw_bs=5)
    bad(tmp_path, r"parents: 3 trees for raw_bs = 4", parents=meta["parents"][:3])
    bad(tmp_path, r"parents\[1\]\[2\] = 2", parents=[[-1, 0, 1, 2], [-1, 0, 2, 0]] * 2)
    bad(tmp_path, r"parents\[0\]: node 1 is on a cycle",
        parents=[[-1, 2, 1, 0]] + meta["parents"][1:])
    bad(tmp_path, r"'preset' is a reserved key", extra_metadata={"preset": "x"})
    bad(tmp_path, r"layout must be one of", layout="rope-last")
    bad(tmp_path, r"sm_scale 0.04166667 is not preset kimi-k2's 0.1308608", sm_scale=576 ** -0.5)
    bad(tmp_path, r"k_extend is F32 but kv_buffer F16", float_dtype=None,
        q=t["q"].astype(np.float32), kv_buffer=t["kv_buffer"].astype(np.float16),
        k_extend=t["k_extend"].astype(np.float32), o=o.astype(np.float32))


def test_offsets_only_mask_indptr_accepted(tmp_path):
    """A kernel handed mask_indptr[:bs] (offsets only) is dumped as it was handed."""
    t, meta, o, lse = small_batch()
    u = dict(t, mask_indptr=t["mask_indptr"][:-1])
    write_small(str(tmp_path / "m.safetensors"), u, meta, o, lse)
    d, _, _ = read_verify_dump(str(tmp_path / "m.safetensors"))
    assert d["mask_indptr"].shape == (4,)
    bad(tmp_path, r"mask_indptr\[1\] = 100000 is outside",
        mask_indptr=np.array([0, 100000, 3, 4]))


def test_compact_keeps_the_batch(tmp_path):
    t, meta, o, lse = small_batch(prefixes=(3, 70, 0, 5))
    # the same batch inside a much larger pool and req_to_token, as a live server has them
    N = t["kv_buffer"].shape[0]
    big = np.random.default_rng(9).standard_normal((5 * N, 1, 576))
    where = np.random.default_rng(10).permutation(5 * N)[:N]
    where[0] = 0
    big[where] = t["kv_buffer"]
    u = dict(t, kv_buffer=round_bf16(big))
    remap = lambda a: where[np.asarray(a, dtype=np.int64)].astype(np.asarray(a).dtype)
    u["kv_indices"] = remap(t["kv_indices"])
    u["out_cache_loc"] = remap(t["out_cache_loc"])
    rtt = np.zeros((40, 600), dtype=np.int32)
    rows = np.concatenate([[0], np.sort(np.random.default_rng(11).choice(
        np.arange(1, 40), t["req_to_token"].shape[0] - 1, replace=False))])
    rtt[rows] = np.pad(remap(t["req_to_token"]), ((0, 0), (0, 600 - t["req_to_token"].shape[1])))
    u["req_to_token"] = rtt
    u["req_pool_indices"] = rows[t["req_pool_indices"]]
    path = str(tmp_path / "c.safetensors")
    write_verify_dump(path, **u, o=o, lse=lse, preset="kimi-k2", float_dtype="bf16", compact=True)
    d, _, md = read_verify_dump(path)
    assert d["kv_buffer"].shape[0] <= N and d["req_to_token"].shape[0] == 5  # row 0 + 4 requests
    assert d["req_to_token"].shape[1] <= max(np.diff(t["kv_indptr"]) + 4)
    for i in range(4):  # kv_indices still what req_to_token holds, and the same values
        P = int(d["seq_lens"][i])
        row = d["req_to_token"][d["req_pool_indices"][i], :P]
        assert np.array_equal(row, d["kv_indices"][d["kv_indptr"][i]:d["kv_indptr"][i + 1]])
    o2, _ = reference_attention(d, float(md["sm_scale"]))
    o1, _ = reference_attention(t, PRESETS["kimi-k2"])
    assert np.array_equal(o1, o2)


# ---------------------------------------------------------------- SGLang helper


def fake_sglang(t, layer_id=3, grow=True):
    """The objects forward_extend sees, holding numpy arrays (the helper only slices/reshapes)."""
    T, H, _ = t["q"].shape
    md = SimpleNamespace(
        qo_indptr=t["qo_indptr"], kv_indptr=t["kv_indptr"], mask_indptr=t["mask_indptr"],
        # SGLang may allocate kv_indices and custom_mask larger than the batch uses
        kv_indices=np.concatenate([t["kv_indices"], np.full(50 if grow else 0, 12345)]),
        custom_mask=np.concatenate([t["custom_mask"], np.ones(70 if grow else 0, bool)]))
    pool = SimpleNamespace(get_key_buffer=lambda lid: t["kv_buffer"].astype(np.float32), page_size=1)
    fb = SimpleNamespace(
        forward_mode=SimpleNamespace(is_target_verify=lambda: True),
        attn_backend=SimpleNamespace(forward_metadata=md), token_to_kv_pool=pool,
        req_to_token_pool=SimpleNamespace(req_to_token=t["req_to_token"]),
        seq_lens=t["seq_lens"], req_pool_indices=t["req_pool_indices"],
        positions=t["positions"], out_cache_loc=t["out_cache_loc"])
    layer = SimpleNamespace(layer_id=layer_id, tp_q_head_num=H, qk_head_dim=576, v_head_dim=512,
                            scaling=PRESETS["kimi-k2"])
    return fb, layer


def test_from_sglang(tmp_path):
    t, meta, o, lse = small_batch()
    T, H, _ = t["q"].shape
    fb, layer = fake_sglang(t)
    q16 = to_bf16_bits(t["q"])  # as bf16 bits through ml_dtypes-free path: use float32 values
    path = str(tmp_path / "s.safetensors")
    from_sglang(fb, layer, t["q"].astype(np.float32).reshape(T, H * 576),
                t["k_extend"].astype(np.float32), o.astype(np.float32).reshape(T, H * 512),
                path=path, preset="kimi-k2", tp=8)
    d, dtypes, md = read_verify_dump(path)
    assert d["q"].shape == (T, H, 576) and d["o"].shape == (T, H, 512)
    assert d["kv_indices"].shape == t["kv_indices"].shape
    assert d["custom_mask"].shape == t["custom_mask"].shape
    assert np.array_equal(d["q"], t["q"]) and np.array_equal(bits_to_f32(q16), t["q"])
    o2, _ = reference_attention(d, float(md["sm_scale"]))
    assert np.array_equal(round_bf16(o2), o)
    assert md["preset"] == "kimi-k2" and md["producer"].startswith("sglang")
    assert float(md["server_sm_scale"]) == layer.scaling
    # a server whose layer.scaling lacks mscale^2: with a preset the dump replays with the
    # preset's scale (so the replay shows the mismatch); without, it records the server's
    layer.scaling = 192 ** -0.5
    from_sglang(fb, layer, t["q"].astype(np.float32), t["k_extend"].astype(np.float32),
                o.astype(np.float32), path=path, preset="kimi-k2")
    md = read_verify_dump(path)[2]
    assert float(md["sm_scale"]) == PRESETS["kimi-k2"] and float(md["server_sm_scale"]) == 192 ** -0.5
    from_sglang(fb, layer, t["q"].astype(np.float32), t["k_extend"].astype(np.float32),
                o.astype(np.float32), path=path)
    md = read_verify_dump(path)[2]
    assert float(md["sm_scale"]) == 192 ** -0.5 and "preset" not in md and "server_sm_scale" not in md


def test_maybe_dump_env_guard(tmp_path, monkeypatch):
    import mlaverify_dump.sglang as sg

    t, meta, o, lse = small_batch()
    fb, layer = fake_sglang(t, layer_id=2)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    call = lambda: maybe_dump_sglang(fb, layer, f32(t["q"]), f32(t["k_extend"]), f32(o))
    monkeypatch.setattr(sg, "_calls", {})
    monkeypatch.delenv("MLAVERIFY_DUMP_DIR", raising=False)
    assert call() is None  # off by default
    monkeypatch.setenv("MLAVERIFY_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("MLAVERIFY_DUMP_LAYER", "5")
    assert call() is None  # another layer
    monkeypatch.setenv("MLAVERIFY_DUMP_LAYER", "2")
    monkeypatch.setenv("MLAVERIFY_DUMP_SKIP", "1")
    monkeypatch.setenv("MLAVERIFY_DUMP_COUNT", "2")
    monkeypatch.setenv("MLAVERIFY_PRESET", "kimi-k2")
    paths = [call() for _ in range(4)]
    assert paths[0] is None and paths[3] is None
    assert [os.path.basename(p) for p in paths[1:3]] == [
        "verify-layer2-call1-rank0.safetensors", "verify-layer2-call2-rank0.safetensors"]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths[1:3])
    assert read_verify_dump(paths[1])[2]["preset"] == "kimi-k2"
    fb.forward_mode = SimpleNamespace(is_target_verify=lambda: False)
    assert call() is None  # only target verify


# ---------------------------------------------------------------- synth


def test_synth_deterministic_in_seed(tmp_path):
    a, b, c = (str(tmp_path / x) for x in "abc")
    ma = synthesize(a, 5)
    mb = synthesize(b, 5)
    mc = synthesize(c, 6)
    assert ma == mb
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert not mismatch and not errors and len(match) == len(names)
    common = sorted(set(names) & set(os.listdir(c)) - {"manifest.json"})
    assert common and not any(filecmp.cmp(os.path.join(a, n), os.path.join(c, n), shallow=False)
                              for n in common)


def test_synth_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mlaverify_dump.synth", str(tmp_path), "--seed",
                          "3"], capture_output=True, text=True, cwd=os.path.join(ROOT, "python"))
    assert out.returncode == 0, out.stderr
    m = json.load(open(tmp_path / "manifest.json"))
    assert m["seed"] == 3 and "files and manifest.json" in out.stdout
    assert all(os.path.exists(tmp_path / e["file"]) for e in m["files"])


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("synth"))
    return d, synthesize(d, 11)


def test_synth_batches_follow_sglang_conventions(synth_dir):
    d, m = synth_dir
    clean = [e for e in m["files"] if e["expect"] == "pass"]
    assert {e["batch"] for e in clean} == {"edges", "long", "chain1", "mixed", "padded"}
    prefixes = set()
    for e in clean:
        t, dtypes, md = read_verify_dump(os.path.join(d, e["file"]))
        assert dtypes == EXPECT_DTYPES
        raw, bs = int(md["raw_bs"]), int(md["bs"])
        H = t["q"].shape[1]
        assert H in (8, 16) and md["heads"] == str(H)
        assert abs(float(md["sm_scale"]) - PRESETS[md["preset"]]) < 1e-15
        parents = json.loads(md["parents"])
        pool = t["kv_buffer"][:, 0]
        assert np.array_equal(pool[t["out_cache_loc"]], t["k_extend"][:, 0])
        assert 0 not in t["kv_indices"][:t["kv_indptr"][raw]]  # slot 0 never handed out
        ref, _ = reference_attention(t, float(md["sm_scale"]), requests=range(raw))
        n = int(t["qo_indptr"][raw])
        assert np.array_equal(round_bf16(ref[:n]), t["o"][:n])  # o = bf16(float64 reference)
        for i in range(bs):
            P = int(t["kv_indptr"][i + 1] - t["kv_indptr"][i])
            a, b = int(t["qo_indptr"][i]), int(t["qo_indptr"][i + 1])
            D = b - a
            assert t["seq_lens"][i] == P
            assert t["mask_indptr"][i + 1] - t["mask_indptr"][i] == D * (P + D)
            row = t["req_to_token"][t["req_pool_indices"][i]]
            assert np.array_equal(row[:P], t["kv_indices"][t["kv_indptr"][i]:t["kv_indptr"][i + 1]])
            if i < raw:
                prefixes.add(P)
                assert t["req_pool_indices"][i] != 0
                assert np.array_equal(row[P:P + D], t["out_cache_loc"][a:b])
                seg = t["custom_mask"][t["mask_indptr"][i]:t["mask_indptr"][i + 1]].reshape(D, P + D)
                assert seg[:, :P].all()
                assert np.array_equal(seg[:, P:], tree_visibility(parents[i]))
                assert np.array_equal(request_visibility(t, i)[:, P:], tree_visibility(parents[i]))
                assert all(0 <= parents[i][k] < k for k in range(1, D)) and parents[i][0] == -1
            else:  # graph padding
                assert P == 1 and t["req_pool_indices"][i] == 0 and t["kv_indices"][t["kv_indptr"][i]] == 0
                assert (t["out_cache_loc"][a:b] == 0).all()
        if e["batch"] == "padded":
            assert raw == 2 and bs == 4
            padseg = t["custom_mask"][t["mask_indptr"][raw]:]
            assert 0 < padseg.mean() < 1  # garbage bytes
            assert not np.array_equal(round_bf16(reference_attention(t, float(md["sm_scale"]))[0][n:]), t["o"][n:])
    assert {0, 1, 63, 64, 65} <= prefixes and max(prefixes) >= 100


def test_synth_corrupted_copies(synth_dir):
    d, m = synth_dir
    by_file = {e["file"]: e for e in m["files"]}
    causes = set()
    for e in m["files"]:
        if e["expect"] != "mismatch":
            continue
        causes.add(e["cause"])
        clean = by_file[f"{e['batch']}.safetensors"]
        tc, _, mc = read_verify_dump(os.path.join(d, clean["file"]))
        tx, _, mx = read_verify_dump(os.path.join(d, e["file"]))
        assert mx == mc  # the metadata (sm_scale included) is the clean batch's
        for name in tc:
            if name not in ("o", "lse"):
                assert np.array_equal(tx[name], tc[name]), (e["file"], name)
        qo = tc["qo_indptr"]
        raw = int(mc["raw_bs"])
        n = int(qo[raw])
        assert np.array_equal(tx["o"][n:], tc["o"][n:])  # padded rows keep their garbage
        for i in range(raw):
            r = rel_frobenius(tx["o"][qo[i]:qo[i + 1]], tc["o"][qo[i]:qo[i + 1]])
            if i in e["requests"] and e["cause"] != "one_element":
                assert r > 1e-2
            elif i not in e.get("uncertain", []) and i not in e["requests"]:
                assert r == 0.0
        sm = float(mc["sm_scale"])
        if e["cause"] == "one_element":
            w = e["where"]
            diff = np.argwhere(tx["o"] != tc["o"])
            assert diff.tolist() == [[w["token"], w["head"], w["column"]]]
            assert w["token"] == qo[w["request"]] + w["token_in_request"]
            seg = np.abs(tc["o"][qo[w["request"]]:qo[w["request"] + 1]]).max()
            assert abs(abs(e["delta"]) - 0.1 * seg) <= 2 ** -8 * (abs(tc["o"][w["token"], w["head"], w["column"]]) + 0.1 * seg)
            assert np.array_equal(tx["lse"], tc["lse"])
            continue
        # the corrupted o is exactly the wrong reading, recomputed here independently
        if e["cause"] == "rope_first_cache":
            pool, ke = tc["kv_buffer"], tc["k_extend"]
            swap = lambda a: np.concatenate([a[..., 64:], a[..., :64]], axis=-1)
            u = dict(tc, kv_buffer=swap(pool), k_extend=swap(ke))
            ref, _ = reference_attention(u, sm, requests=range(raw))
        elif e["cause"] == "sm_scale_576":
            ref, _ = reference_attention(tc, 1 / 24.0, requests=range(raw))
        elif e["cause"] == "mask_indptr_shifted":
            ref, _ = reference_attention(tc, sm, mask_starts=tc["mask_indptr"][1:], requests=range(raw))
        assert np.array_equal(round_bf16(ref[:n]), tx["o"][:n]), e["file"]
    assert causes == {"rope_first_cache", "mask_indptr_shifted", "one_element", "sm_scale_576"}


def test_rope_first_swap_is_the_rope_first_reading():
    """rope_first=True equals reading the swapped rows latent-first (the check above relies on it)."""
    t, meta, o, lse = small_batch()
    swap = lambda a: np.concatenate([a[..., 64:], a[..., :64]], axis=-1)
    a, _ = reference_attention(t, 0.13, rope_first=True)
    b, _ = reference_attention(dict(t, kv_buffer=swap(t["kv_buffer"]), k_extend=swap(t["k_extend"])), 0.13)
    assert np.array_equal(a, b)


# ---------------------------------------------------------------- the real SGLang dumps


@pytest.mark.parametrize("name", ["k2_eagle16", "k2_padded"])
def test_reference_reproduces_real_sglang_dumps(name):
    """The float64 reference, reading the format as SGLang's Triton kernel wrote it, agrees with
    the kernel's o on every real request within bf16 output rounding (BF16_OUT_REL_FROB)."""
    path = os.path.join(SHARED_DUMPS, f"{name}.safetensors")
    if not os.path.exists(path):
        pytest.skip(f"no shared dump at {path} (set MLAVERIFY_SHARED_DUMPS)")
    t, dtypes, md = read_verify_dump(path)
    assert dtypes["q"] == "BF16" and dtypes["o"] == "BF16"
    raw = int(md["raw_bs"])
    ref, _ = reference_attention(t, float(md["sm_scale"]), requests=range(raw))
    qo = t["qo_indptr"]
    worst = 0.0
    for i in range(raw):
        a, b = int(qo[i]), int(qo[i + 1])
        r = rel_frobenius(t["o"][a:b], ref[a:b])
        worst = max(worst, r)
        print(f"{name} request {i}: rel. Frobenius {r:.3e}, max |err| / max |ref| "
              f"{np.abs(t['o'][a:b] - ref[a:b]).max() / np.abs(ref[a:b]).max():.3e}")
        assert r < BF16_OUT_REL_FROB, (name, i, r)
    # and the worst agrees with what the dump's producer measured in fp64
    assert abs(worst - float(md["fp64_rel_frob_worst"])) < 5e-6
    # the reference is not trivially close: the wrong readings are far away
    for kw, sm in (({"rope_first": True}, float(md["sm_scale"])), ({}, 576 ** -0.5)):
        bad, _ = reference_attention(t, sm, requests=range(raw), **kw)
        assert rel_frobenius(t["o"][:qo[raw]], bad[:qo[raw]]) > 0.1


@pytest.mark.parametrize("name", ["k2_eagle16", "k2_padded"])
def test_writer_rewrites_real_sglang_dumps(name, tmp_path):
    """write_verify_dump, given the tensors SGLang's dump holds, writes the same tensors with the
    same dtypes and shapes, and metadata that mlaverify reads the same way."""
    path = os.path.join(SHARED_DUMPS, f"{name}.safetensors")
    if not os.path.exists(path):
        pytest.skip(f"no shared dump at {path} (set MLAVERIFY_SHARED_DUMPS)")
    t, dtypes, md = read_verify_dump(path)
    out = str(tmp_path / "re.safetensors")
    write_verify_dump(out, **t, preset=md["preset"], tp=8, raw_bs=int(md["raw_bs"]),
                      parents=md["parents"], float_dtype="bf16",
                      extra_metadata={"fp64_rel_frob_worst": md["fp64_rel_frob_worst"]})
    t2, dtypes2, md2 = read_verify_dump(out)
    assert dtypes2 == dtypes
    for k in t:
        assert np.array_equal(t2[k], t[k]), k
    for k in ("preset", "heads", "page_size", "layout", "bs", "raw_bs", "draft_tokens"):
        assert md2[k] == md[k], k
    assert json.loads(md2["parents"]) == json.loads(md["parents"])
    assert abs(float(md2["sm_scale"]) - float(md["sm_scale"])) < 1e-6 * float(md["sm_scale"])


def test_installed_copy():
    """scripts/venv.sh installed ./python; that copy is the source tree's version."""
    venv_py = os.path.join(ROOT, ".venv", "bin", "python")
    if not os.path.exists(venv_py):
        pytest.skip("no .venv (scripts/venv.sh)")
    out = subprocess.run([venv_py, "-I", "-c", "import mlaverify_dump as m; print(m.__version__)"],
                         capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == __version__
