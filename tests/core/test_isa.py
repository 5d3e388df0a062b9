"""Instruction-set caps: the variables that set them, and what oneDNN's own lines prove."""

import signal

import pytest

from mptbench.core import isa
from mptbench.core.contract import VariantConfig
from mptbench.core.outcomes import refusal

# oneDNN's lines as TensorFlow 2.21 printed them on an Intel Xeon with AMX-BF16, mixed_bfloat16,
# kernels capped at AVX512_CORE_BF16 (ONEDNN_VERBOSE=profile_create).
CAPPED = "".join(f"onednn_verbose,v1,{line}\n" for line in (
    "info,oneDNN v3.7.3 (commit N/A)",
    "info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support",
    "primitive,create:cache_miss,cpu,convolution,brg_conv_fwd:avx512_core_bf16,forward_training,"
    "src:bf16::blocked:acdb::f0 wei:bf16:a:blocked:AcdB32a2b::f0 bia:undef::undef::: "
    "dst:bf16::blocked:acdb::f0,attr-scratchpad:user,alg:convolution_direct,"
    "mb8_ic16oc32_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1,0.32",
    "primitive,create:cache_miss,cpu,reorder,jit:uni,undef,src:bf16::blocked:cdba::f0 "
    "dst:bf16::blocked:AcdB32a2b::f0,,,32x16x3x3,0.05",
    "primitive,create:cache_miss,cpu,eltwise,jit:avx512_core,forward_training,"
    "data:f32::blocked:ab::f0 diff:undef::undef:::,,alg:eltwise_relu,8x10,0.01",
))


def read(text: str) -> isa.Kernels:
    kernels = isa.Kernels()
    assert all(kernels.read(line) for line in text.splitlines(keepends=True))
    assert not kernels.read("repeat 1, float32: ok\n")  # the engine's own lines pass on
    return kernels


def test_onednn_lines_say_what_each_dtype_s_kernels_were_built_for():
    kernels = read(CAPPED)
    assert kernels.words == "Intel AVX-512 with Intel DL Boost and bfloat16 support"
    assert kernels.highest() == "avx512_core_bf16"
    assert kernels.highest(("f32",)) == "avx512_core"
    assert kernels.facts("bf16") == {
        "kernel_isa": "avx512_core_bf16", "kernel_isa_own": "avx512_core_bf16",
        "kernels": "brg_conv_fwd:avx512_core_bf16, jit:uni",
        "onednn_isa": "Intel AVX-512 with Intel DL Boost and bfloat16 support",
    }


def test_a_kernel_above_the_cap_is_told_apart_from_one_within_it():
    uncapped = read(CAPPED.replace("avx512_core_bf16", "avx10_1_512_amx"))
    assert uncapped.highest() == "avx10_1_512_amx"
    assert isa.above(uncapped.highest(), "AVX512_CORE_BF16")  # the cap did not take
    assert not isa.above(read(CAPPED).highest(), "AVX512_CORE_BF16")
    assert isa.above("avx512_core_fp16", "AVX512_CORE_BF16")  # between two caps: above the lower
    assert not isa.above("avx2", "AVX2") and isa.above("avx512_core", "AVX2")
    assert not isa.above("avx2", "AVX")  # oneDNN creates its avx2 1x1 convolution there
    assert not isa.above(None, "AVX2") and not isa.above("avx512_core", None)
    assert isa.isa_of("jit:uni") is None and isa.isa_of("gemm:jit:bf16") is None


def test_a_cap_is_set_for_each_backend_and_the_variant_s_own_flags_are_kept():
    assert isa.environment(None, "tensorflow") == {}
    assert isa.environment("AVX2", "tensorflow") == {
        "ONEDNN_MAX_CPU_ISA": "AVX2", "TF_ENABLE_ONEDNN_OPTS": "1"}
    variant = VariantConfig(
        name="mine", backends=("tensorflow", "jax"), jit_compile="auto",
        env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}, wheel=None, build=None,
        description="mine", isa="AVX512_CORE_BF16",
    )
    assert variant.environment("jax") == {
        "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_cpu_max_isa=AVX512_BF16",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
    }
    with pytest.raises(KeyError, match="no instruction-set cap AVX3"):
        isa.environment("AVX3", "tensorflow")


def test_what_a_machine_lacks_for_a_cap_counts_every_generation_below_it():
    zen3 = {"avx", "avx2", "fma"}
    assert isa.lacks("AVX2", zen3) == []
    assert isa.lacks("AVX512_CORE_BF16", zen3 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}) \
        == ["avx512_vnni", "avx512_bf16"]
    assert isa.lacks("AVX", set()) == ["avx"]


def test_an_abort_with_onednn_s_refusal_is_unsupported_and_any_other_a_crash():
    said = ["terminate called after throwing an instance of 'dnnl::error'\n",
            "  what():  could not create a primitive descriptor for the matmul primitive. Run "
            "workload with environment variable ONEDNN_VERBOSE=all to get additional diagnostic "
            "information.\n"]
    outcome, reason = refusal(-signal.SIGABRT, said)
    assert outcome == "unsupported"
    assert reason == ("oneDNN: could not create a primitive descriptor for the matmul primitive "
                      "(the process aborted)")
    assert refusal(-signal.SIGSEGV, said) is None
    assert refusal(-signal.SIGABRT, ["free(): invalid pointer\n"]) is None
