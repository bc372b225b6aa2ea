"""Whether this CPU runs a reduced precision in hardware, and a warning where it does not.

bf16 and int8 pay off on a CPU only with the instructions for them: bfloat16 dot products
(AVX512-BF16, AMX) and int8 dot products (AVX512-VNNI, AVX-VNNI, AMX). Without them torch
emulates the products, and reduced precision is far slower than float32: measured on an
AVX2-only AMD EPYC (one thread, a 1,024 × 384 by 384 × 1,536 product), float32 49 GFLOP/s,
bfloat16 5, int8 (`torch._int_mm`) 1; the NER pipeline on WNUT-17 tweets (2 threads, batch
32) 1,812 words/s in fp32, 472 in bf16, 189 in int8. The user's setting is kept (a pipeline saved with a
precision loads with it); the warning says what it costs and what to set instead.
"""
import warnings
from functools import lru_cache
from typing import Dict, Optional, Tuple

import torch

# The instructions that make each precision's matrix products fast, by torch's names for them.
FAST_WITH: Dict[str, Tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16"),
    "int8": ("avx512_vnni", "avx_vnni", "amx_int8"),
}


class SlowPrecisionWarning(UserWarning):
    """A reduced precision that this CPU emulates: slower than fp32, not faster."""


def _x86_features() -> Optional[Dict[str, object]]:
    """torch's report of this x86 CPU's features; None where it gives none (e.g. on ARM)."""
    if not hasattr(torch.cpu, "get_capabilities"):
        return None
    features = torch.cpu.get_capabilities()
    return features if features.get("architecture") == "x86_64" else None


@lru_cache(maxsize=None)
def emulated_on_cpu(precision: str) -> bool:
    """Whether this x86 CPU lacks every instruction set that runs `precision` fast (False for
    fp32, and where torch does not report x86 features, e.g. on ARM)."""
    wanted, features = FAST_WITH.get(precision), _x86_features()
    return wanted is not None and features is not None and not any(features.get(name) for name in wanted)


@lru_cache(maxsize=None)
def fast_on_cpu(precision: str) -> bool:
    """Whether this x86 CPU reports an instruction set that runs `precision` fast (False for
    fp32, and where torch does not report x86 features)."""
    wanted, features = FAST_WITH.get(precision), _x86_features()
    return wanted is not None and features is not None and any(features.get(name) for name in wanted)


_WARNED = set()  # precisions already warned about in this process


def warn_if_emulated(precision: str) -> None:
    """Warn, once per precision and process, when `precision` runs emulated on this CPU (called
    at every forward pass: after the first call, a set lookup)."""
    if precision in _WARNED or not emulated_on_cpu(precision):
        return
    _WARNED.add(precision)
    needs = " or ".join(name.upper().replace("_", "-") for name in FAST_WITH[precision])
    warnings.warn(
        f'precision "{precision}": this CPU ({torch.cpu.get_capabilities().get("cpu_name", "?")}) '
        f"has no {needs} instructions, so torch emulates {precision} matrix products (on an AVX2 CPU the "
        f"NER pipeline ran 4x slower in bf16 than in fp32, 10x in int8). Set precision = \"fp32\" on this machine, "
        f"e.g. spacy.load(path, config={{\"components\": {{\"<encoder name>\": {{\"precision\": \"fp32\"}}}}}}), "
        f"or run on a CPU that has them (or a GPU, with \"bf16\"/\"fp16\").",
        SlowPrecisionWarning,
        stacklevel=3,
    )
