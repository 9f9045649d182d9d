"""Formulas that formula families compute their answers with (exposed to templates by name).

Each function is the textbook formula, tested against a table of published values in
tests/questions/test_families.py; a family's ``answer`` expression calls them, e.g.
``zero_memory_gb(params_b, 3, world_size)``.
"""

from __future__ import annotations

from collections.abc import Callable


def speedup(t1: float, tn: float) -> float:
    """Speed-up of a run taking ``tn`` over one taking ``t1`` (same work)."""
    return t1 / tn


def scaling_efficiency(t1: float, tn: float, n: int) -> float:
    """Strong-scaling efficiency: speed-up divided by the number of workers (1.0 is perfect)."""
    return t1 / (tn * n)


def weak_scaling_efficiency(throughput_1: float, throughput_n: float, n: int) -> float:
    """Weak-scaling efficiency from per-run throughputs: throughput_n / (n * throughput_1)."""
    return throughput_n / (n * throughput_1)


def effective_batch(per_gpu: int, world_size: int, accumulation: int = 1) -> int:
    """Samples per optimizer step: per-GPU batch x data-parallel ranks x accumulation steps."""
    return per_gpu * world_size * accumulation


def linear_scaled_lr(base_lr: float, base_batch: int, new_batch: int) -> float:
    """The linear scaling rule (Goyal et al. 2017): the learning rate grows with the batch."""
    return base_lr * new_batch / base_batch


def sqrt_scaled_lr(base_lr: float, base_batch: int, new_batch: int) -> float:
    """The square-root scaling rule (often used with Adam): lr x sqrt(new / base)."""
    return float(base_lr * (new_batch / base_batch) ** 0.5)


def zero_memory_bytes(params: float, stage: int, world_size: int, k: int = 12) -> float:
    """Model-state bytes per rank under mixed-precision Adam (ZeRO paper, section 3/5).

    2 bytes of fp16 parameters, 2 of fp16 gradients and ``k`` (12 for Adam: fp32 master copy, momentum,
    variance) of optimizer state per parameter. Stage 0 is plain data parallelism; stage 1 shards the
    optimizer state, stage 2 also the gradients, stage 3 also the parameters.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, not {stage}")
    p, g, o = 2.0 * params, 2.0 * params, float(k) * params
    if stage >= 1:
        o /= world_size
    if stage >= 2:
        g /= world_size
    if stage >= 3:
        p /= world_size
    return p + g + o


def zero_memory_gb(params_billion: float, stage: int, world_size: int, k: int = 12) -> float:
    """:func:`zero_memory_bytes` for ``params_billion`` x 1e9 parameters, in GB (1e9 bytes)."""
    return zero_memory_bytes(params_billion * 1e9, stage, world_size, k) / 1e9


def ring_allreduce_bytes(size_bytes: float, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``size_bytes``: 2 (n - 1) / n x size."""
    return 2.0 * (world_size - 1) / world_size * size_bytes


def ring_allgather_bytes(size_bytes: float, world_size: int) -> float:
    """Bytes each rank sends in a ring all-gather producing ``size_bytes`` in total: (n - 1) / n x size."""
    return (world_size - 1) / world_size * size_bytes


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle fraction of a GPipe / 1F1B schedule: (p - 1) / (m + p - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def interleaved_bubble_fraction(stages: int, microbatches: int, chunks: int) -> float:
    """Bubble of the interleaved 1F1B schedule (Narayanan et al. 2021): the bubble time shrinks by
    the number of model chunks per stage, (p - 1) / v relative to m micro-batches of ideal time.
    """
    bubble = (stages - 1) / chunks
    return bubble / (microbatches + bubble)


def samples_per_rank(dataset: int, world_size: int, drop_last: bool = False) -> int:
    """Samples each rank gets from DistributedSampler (padding by repetition unless drop_last)."""
    if drop_last:
        return dataset // world_size
    return -(-dataset // world_size)


def steps_per_epoch(dataset: int, world_size: int, batch: int, drop_last: bool = False) -> int:
    """Optimizer steps per epoch per rank with DistributedSampler and a DataLoader of ``batch``."""
    per_rank = samples_per_rank(dataset, world_size, drop_last)
    return -(-per_rank // batch)


def amdahl_speedup(parallel_fraction: float, n: int) -> float:
    """Amdahl's law: 1 / ((1 - f) + f / n)."""
    return 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / n)


def fsdp_param_bytes_per_rank(params: float, bytes_per_param: int, world_size: int) -> float:
    """Bytes of parameters a rank keeps when fully sharded (the unsharded block is extra, transient)."""
    return params * bytes_per_param / world_size


def model_flops_utilization(params: float, tokens_per_s: float, gpus: int, peak_tflops: float) -> float:
    """MFU (PaLM paper, appendix B): 6 x N FLOPs per token for a dense transformer's forward and backward,
    divided by the hardware's peak; attention FLOPs are left out as in the usual estimate.
    """
    return 6.0 * params * tokens_per_s / (gpus * peak_tflops * 1e12)


def accumulation_steps(global_batch: int, per_gpu: int, world_size: int) -> int:
    """Micro-batches to accumulate so that per_gpu x world_size x steps == global_batch."""
    return global_batch // (per_gpu * world_size)


def checkpoint_gb(params_billion: float, weight_bytes: int, with_adam: bool) -> float:
    """Checkpoint size in GB: the weights, plus two fp32 Adam moments (8 bytes/param) when saved."""
    return params_billion * (weight_bytes + (8 if with_adam else 0))


def activation_bytes_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False) -> float:
    """Activation memory of one transformer layer in bytes, 16-bit activations, no recomputation
    (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 1-4).

    ``t``: tensor-parallel size; ``sp``: sequence parallelism on top of it.
    """
    if t == 1:
        return s * b * h * (34 + 5 * a * s / h)
    if sp:
        return s * b * h / t * (34 + 5 * a * s / h)
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


def allreduce_seconds(size_gb: float, world_size: int, bus_gbps: float) -> float:
    """Time of a bandwidth-bound ring all-reduce: 2 (n - 1) / n x size / link bandwidth (GB/s)."""
    return ring_allreduce_bytes(size_gb, world_size) / bus_gbps


def chunk_sizes(n: int, parts: int) -> list[int]:
    """Sizes ``torch.chunk`` (and DTensor Shard, DataParallel scatter) gives: ceil-sized pieces first."""
    size = -(-n // parts)
    out: list[int] = []
    left = n
    while left > 0 and len(out) < parts:
        out.append(min(size, left))
        left -= size
    return out


#: Everything a family template or expression may call.
FORMULAS: dict[str, Callable[..., float | int | list[int]]] = {
    f.__name__: f
    for f in (
        speedup,
        scaling_efficiency,
        weak_scaling_efficiency,
        effective_batch,
        linear_scaled_lr,
        sqrt_scaled_lr,
        zero_memory_bytes,
        zero_memory_gb,
        ring_allreduce_bytes,
        ring_allgather_bytes,
        pipeline_bubble_fraction,
        interleaved_bubble_fraction,
        samples_per_rank,
        steps_per_epoch,
        amdahl_speedup,
        fsdp_param_bytes_per_rank,
        model_flops_utilization,
        accumulation_steps,
        checkpoint_gb,
        activation_bytes_per_layer,
        allreduce_seconds,
        chunk_sizes,
    )
}
