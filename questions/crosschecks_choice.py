"""Independent derivations for the model-choice families (questions/families/model-choice.yaml).

A choice family keys each case's answer from a table. The derivations here restate each case's numbers
(model size, GPU memory, nodes, batch sizes) and decide the option again by a rule chain written apart from
that table, so a prompt whose arithmetic no longer supports its keyed answer fails the build. Only the
final option *text* is looked up in the family's ``opt`` table (the decision is not). Registered when
:mod:`questions.answer_key`, the registry's one reader, imports this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from questions.crosschecks import Context, cross_check

#: Mixed-precision Adam: bf16 weights and gradients plus fp32 master weights and two moments.
_BYTES_PER_PARAM = 16


def _option(c: Context, key: str) -> str:
    """The family's wording of option ``key`` (the decision itself was made without the table)."""
    return str(c["opt"][key])


# -------------------------------------------------------------------------------- FSDP2 setup choice
@dataclass(frozen=True)
class _Fsdp:
    params_b: float
    gpus_per_node: int
    nodes: int
    gpu_gb: float
    act_gb: float = 0.0
    host_gb: float = 0.0
    default_gb: float | None = None  # measured use with default settings, when the job already fits


_FSDP_CASES = {
    "keep": _Fsdp(params_b=3, gpus_per_node=8, nodes=1, gpu_gb=80, default_gb=35),
    "full": _Fsdp(params_b=30, gpus_per_node=8, nodes=4, gpu_gb=80, act_gb=30),
    "offload": _Fsdp(params_b=20, gpus_per_node=8, nodes=1, gpu_gb=24, host_gb=1000),
}


@cross_check("fam-mc-fsdp-variant", "compare each layout's model state per GPU with the GPU memory")
def _fsdp_variant(c: Context) -> str:
    s = _FSDP_CASES[c["case"]]
    state_gb = _BYTES_PER_PARAM * s.params_b
    if s.default_gb is not None:
        unsharded_bf16_gb = 2 * s.params_b  # every block's gathered parameters kept until backward
        if s.default_gb + unsharded_bf16_gb <= s.gpu_gb:
            return _option(c, "keep")
    if s.nodes > 1 and state_gb / s.gpus_per_node + s.act_gb <= s.gpu_gb:
        return _option(c, "hsdp")
    if state_gb / (s.gpus_per_node * s.nodes) + s.act_gb <= s.gpu_gb:
        return _option(c, "full")
    if state_gb <= s.host_gb:
        return _option(c, "offload")
    raise ValueError(f"no FSDP2 setup fits case {c['case']!r}")


# ----------------------------------------------------------------------- activation checkpointing
@dataclass(frozen=True)
class _Ckpt:
    total_gb: float
    act_gb: float
    blocks: int = 32
    gpu_gb: float = 80


_CKPT_CASES = {
    "none": _Ckpt(total_gb=55, act_gb=20),
    "partial": _Ckpt(total_gb=88, act_gb=60),
    "full": _Ckpt(total_gb=230, act_gb=200),
}


@cross_check("fam-mc-act-checkpoint", "checkpoint blocks one by one until the step fits")
def _act_checkpoint(c: Context) -> str:
    if c["case"] == "reentrant":
        # DDP supports unused parameters in checkpointed code only with the non-reentrant variant.
        return _option(c, "reentrant")
    s = _CKPT_CASES[c["case"]]
    per_block = s.act_gb / s.blocks
    for checkpointed in range(s.blocks + 1):
        if s.total_gb - per_block * checkpointed <= s.gpu_gb:
            break
    if checkpointed == 0:
        return _option(c, "none")
    if checkpointed <= s.blocks // 4:  # "a few of the blocks"
        return _option(c, "partial")
    if checkpointed > s.blocks // 2:  # "all or nearly all blocks"
        return _option(c, "full")
    raise ValueError(
        f"case {c['case']!r} needs {checkpointed} of {s.blocks} blocks: neither a few nor nearly all"
    )


# ----------------------------------------------------------------------------- parallelism layout
@dataclass(frozen=True)
class _Layout:
    params_b: float
    gpus_per_node: int = 8
    nodes: int = 1
    gpu_gb: float = 80
    act_gb: float = 0.0
    slow_between_nodes: bool = False
    gpus_now: int = 0  # data-parallel GPUs today, at the largest global batch that converges
    gpus_new: int = 0
    one_sequence_overflows: bool = False
    moe: bool = False


_LAYOUT_CASES = {
    "ddp": _Layout(params_b=0.35, nodes=4, act_gb=30),
    "hsdp": _Layout(params_b=13, nodes=4, act_gb=25, slow_between_nodes=True),
    "tp": _Layout(params_b=70, nodes=512, gpus_now=2048, gpus_new=4096),
    "pp": _Layout(params_b=175, nodes=64, slow_between_nodes=True),
    "cp": _Layout(params_b=8, one_sequence_overflows=True),
    "ep": _Layout(params_b=0, moe=True),
}


@cross_check(
    "fam-mc-parallel-layout", "check the binding constraint: sparsity, sequence, memory, batch, links"
)
def _parallel_layout(c: Context) -> str:
    s = _LAYOUT_CASES[c["case"]]
    if s.moe:
        return _option(c, "ep")
    if s.one_sequence_overflows:
        return _option(c, "cp")  # a micro-batch of one sequence cannot shrink further
    state_gb = _BYTES_PER_PARAM * s.params_b
    if state_gb + s.act_gb <= s.gpu_gb:
        return _option(c, "ddp")
    if s.gpus_new > s.gpus_now > 0:
        # Every data-parallel GPU takes at least one sequence: the data-parallel degree may not grow.
        tp = 1
        while s.gpus_new // tp > s.gpus_now:
            tp *= 2
        if tp > 1:
            return _option(c, "tp")
    if state_gb / s.gpus_per_node + s.act_gb <= s.gpu_gb:
        return _option(c, "hsdp" if s.slow_between_nodes else "fsdp")
    return _option(c, "pp" if s.slow_between_nodes else "fsdp")


# ------------------------------------------------------------------------------- learning-rate rule
@dataclass(frozen=True)
class _Lr:
    optimizer: str
    batch_before: int
    batch_after: int
    lr: float = 0.0
    early_divergence: bool = False


_LR_CASES = {
    "linear": _Lr("sgd", 256, 8192, lr=0.1),
    "accum": _Lr("any", 16 * 1, 8 * 2),  # GPUs x accumulation steps, per-GPU batch unchanged
    "sqrt": _Lr("adam", 64, 256, lr=2e-5),
    "lars": _Lr("sgd", 256, 32 * 1024),
    "lamb": _Lr("adam", 256, 64 * 1024),
    "warmup": _Lr("sgd", 256, 8192, early_divergence=True),
}


def _lr_text(lr: float) -> str:
    """3.2 -> '3.2'; 4e-05 -> '4e-5' (the way the prompts write small rates)."""
    if lr >= 1e-3:
        return f"{lr:g}"
    exponent = math.floor(math.log10(lr))
    return f"{lr / 10**exponent:g}e{exponent}"


@cross_check("fam-mc-lr-rule", "scale the rate by the batch ratio the optimizer's rule prescribes")
def _lr_rule(c: Context) -> str:
    s = _LR_CASES[c["case"]]
    ratio = s.batch_after / s.batch_before
    if ratio == 1:
        return _option(c, "keep")
    if s.early_divergence:
        return _option(c, "warm")
    if s.batch_after >= 16 * 1024:
        return _option(c, "lars" if s.optimizer == "sgd" else "lamb")
    if s.optimizer == "sgd":
        return f"lr {_lr_text(s.lr * ratio)} (linear rule) with about 5 epochs of warmup"
    return f"lr {_lr_text(s.lr * math.sqrt(ratio))} (square-root rule), then a short sweep"


# -------------------------------------------------------------------------------- pipeline schedule
@dataclass(frozen=True)
class _Pipe:
    stages: int
    micro: int
    layers_per_stage: int = 1
    out_of_memory: bool = False
    tuned_interleaved: bool = False


_PIPE_CASES = {
    "memory": _Pipe(stages=4, micro=32, out_of_memory=True),
    "bubble": _Pipe(stages=8, micro=8, layers_per_stage=4),
    "zerobubble": _Pipe(stages=8, micro=8, layers_per_stage=4, tuned_interleaved=True),
}


@cross_check("fam-mc-pipeline-schedule", "count stored micro-batches and the idle fraction of the schedule")
def _pipeline_schedule(c: Context) -> str:
    s = _PIPE_CASES[c["case"]]
    if s.out_of_memory:
        gpipe_in_flight = s.micro  # every forward runs before the first backward
        one_f_one_b_in_flight = min(s.micro, s.stages)
        if one_f_one_b_in_flight < gpipe_in_flight:
            return _option(c, "1f1b")
    if s.tuned_interleaved:
        return _option(c, "zb")
    bubble = (s.stages - 1) / (s.micro + s.stages - 1)
    if round(100 * bubble) != 47:
        raise ValueError(f"the prompt states a 47% bubble; the schedule gives {100 * bubble:.1f}%")
    if s.layers_per_stage >= 2:
        return _option(c, "interleaved")
    raise ValueError(f"no schedule change derived for case {c['case']!r}")
