"""Independent derivations of computed families' answers, checked per instance by the build.

A family's ``value`` formula and the derivation here are written separately, and where it is cheap the
derivation simulates what the question describes (the ring's steps, the sampler's indices, the pipeline's
schedule, the DDP buckets, the ranks torchrun numbers) instead of restating the closed form. The build
(:func:`questions.answer_key.cross_check_problems`) prints the derived value the way the family prints its
answer and refuses the instance unless it is the keyed choice.

Each derivation receives the instance's context (its params and ``let`` values) and must not call
:mod:`questions.formulas`: a shared mistake would then agree with itself.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

Derived = float | int | str
Context = Mapping[str, Any]


@dataclass(frozen=True)
class CrossCheck:
    """How an answer is derived a second time (``how`` is named in the build's error)."""

    how: str
    derive: Callable[[Context], Derived]


CROSS_CHECKS: dict[str, CrossCheck] = {}


Derivation = Callable[[Context], Derived]


def cross_check(family_id: str, how: str) -> Callable[[Derivation], Derivation]:
    """Register a derivation for ``family_id``."""

    def register(fn: Derivation) -> Derivation:
        if family_id in CROSS_CHECKS:
            raise ValueError(f"two cross-checks for {family_id}")
        CROSS_CHECKS[family_id] = CrossCheck(how, fn)
        return fn

    return register


# ------------------------------------------------------------------------------------ batch arithmetic
@cross_check("fam-effective-batch", "count the samples every rank feeds into one optimizer step")
def _effective_batch(c: Context) -> int:
    samples = 0
    for _rank in range(c["gpus"]):
        for _micro in range(c["accum"]):
            samples += c["per_gpu"]
    return samples


@cross_check("fam-accumulation-steps", "add micro-batches until the global batch is reached")
def _accumulation_steps(c: Context) -> int:
    steps = 0
    while steps * c["per_gpu"] * c["gpus"] < c["target"]:
        steps += 1
    return steps


@cross_check("fam-elastic-keep-batch", "add accumulation steps on the new world until the old global batch")
def _elastic_keep_batch(c: Context) -> int:
    old_global = c["before"] * c["per_gpu"] * 4
    steps = 1
    while c["after"] * c["per_gpu"] * steps < old_global:
        steps += 1
    return steps


@cross_check("fam-syncbn-batch", "sum the per-GPU batch over the ranks BatchNorm reduces its statistics over")
def _syncbn_batch(c: Context) -> int:
    group = range(c["world_size"]) if c["sync"] else range(1)
    return sum(c["per_gpu"] for _ in group)


@cross_check("fam-allreduces-per-step", "walk the micro-batches of one step and count the bucket all-reduces")
def _allreduces_per_step(c: Context) -> int:
    count = 0
    for micro in range(c["accum"]):
        synced = not c["no_sync"] or micro == c["accum"] - 1
        if synced:
            count += c["buckets"]
    return count


@cross_check("fam-grad-accum-loss-scale", "sum accum unscaled micro-batch gradients against one averaged one")
def _grad_accum_loss_scale(c: Context) -> float:
    # Without dividing the loss by accum, the accumulated gradient is the sum of accum mean-gradients: an SGD
    # step then moves as far as lr x accum would with the averaged gradient.
    summed = sum(1.0 for _ in range(c["accum"]))
    return float(c["lr"] * summed)


# ------------------------------------------------------------------------------------ ranks and meshes
@cross_check("fam-torchrun-global-rank", "number every process node by node, local rank by local rank")
def _torchrun_global_rank(c: Context) -> int:
    rank = 0
    for node in range(4):
        for local in range(c["nproc"]):
            if (node, local) == (c["node"], c["local"]):
                return rank
            rank += 1
    raise ValueError("the process is not in the job")


@cross_check("fam-loader-processes", "count the main process and workers of every rank on every node")
def _loader_processes(c: Context) -> int:
    processes = 0
    for _node in range(c["nodes"]):
        for _rank in range(c["gpus"]):
            processes += 1 + c["workers"]
    return processes


def _mesh(rows: int, cols: int) -> list[list[int]]:
    """A 2-D device mesh filled row-major, as init_device_mesh lays out ranks."""
    ranks = iter(range(rows * cols))
    return [[next(ranks) for _ in range(cols)] for _ in range(rows)]


@cross_check("fam-mesh-global-rank", "fill the mesh row-major and read the coordinate")
def _mesh_global_rank(c: Context) -> int:
    return _mesh(c["a"], c["b"])[c["i"]][c["j"]]


@cross_check("fam-mesh-group-members", "fill the mesh row-major and read the rank's row (tp) or column (dp)")
def _mesh_group_members(c: Context) -> str:
    mesh = _mesh(c["a"], c["b"])
    row = next(r for r in mesh if c["rank"] in r)
    col_index = row.index(c["rank"])
    members = row if c["dim"] == "tp" else [r[col_index] for r in mesh]
    return str(members)


@cross_check("fam-parallel-dims", "find the data-parallel size that fills the (pp, dp, tp) mesh")
def _parallel_dims(c: Context) -> int:
    return next(dp for dp in range(1, c["gpus"] + 1) if c["pp"] * dp * c["tp"] == c["gpus"])


# ------------------------------------------------------------------------------------------ the ring
def _ring_sent(world: int, size: float, phases: int) -> float:
    """What rank 0 sends in ``phases`` ring passes (reduce-scatter, all-gather) over ``world`` ranks: each
    pass is world - 1 steps, and in each step every rank sends one of the world chunks to its neighbour.
    """
    chunk = size / world
    sent = 0.0
    for _phase in range(phases):
        # Rank 0 starts holding its own chunk index 0 (its reduced chunk, or its shard) and forwards, at
        # each step, the chunk it received the step before; it stops once every rank has every chunk.
        holding = {0}
        forwarding = 0
        while len(holding) < world:
            sent += chunk
            forwarding = (forwarding - 1) % world  # what its left neighbour sent it
            holding.add(forwarding)
    return sent


@cross_check("fam-ring-allreduce-bytes", "step a ring reduce-scatter, then all-gather; add what a rank sends")
def _ring_allreduce(c: Context) -> float:
    return _ring_sent(c["world_size"], float(c["size_mb"]), phases=2)


@cross_check("fam-ring-allgather-bytes", "step a ring all-gather and add what a rank sends")
def _ring_allgather(c: Context) -> float:
    return _ring_sent(c["world_size"], float(c["size_mb"]), phases=1)


# ----------------------------------------------------------------------------------------- samplers
def _sampler_indices(n: int, world: int, drop_last: bool) -> list[list[int]]:
    """Each rank's indices, the way DistributedSampler (shuffle=False) builds them: the sample count per
    rank is ceil((n - world) / world) with drop_last and ceil(n / world) otherwise (torch's own
    expressions), the list is padded by repeating from the start or truncated, then strided by rank.
    """
    per_rank = math.ceil((n - world) / world) if drop_last and n % world else math.ceil(n / world)
    total = per_rank * world
    indices = list(range(n))
    while len(indices) < total:
        indices += indices[: total - len(indices)]
    indices = indices[:total]
    return [indices[r:total:world] for r in range(world)]


@cross_check("fam-sampler-samples", "build DistributedSampler's index lists and count a rank's")
def _sampler_samples(c: Context) -> int:
    lists = _sampler_indices(c["n"], c["world_size"], c["drop_last"])
    if len({len(x) for x in lists}) != 1:
        raise ValueError("ranks got different counts")
    return len(lists[0])


@cross_check("fam-sampler-padding", "build DistributedSampler's index lists and count the repeated samples")
def _sampler_padding(c: Context) -> int:
    seen = Counter(i for ranks in _sampler_indices(c["n"], c["world_size"], False) for i in ranks)
    return sum(k - 1 for k in seen.values())


@cross_check("fam-steps-per-epoch", "take DataLoader batches off a rank's sampler length until none is left")
def _steps_per_epoch(c: Context) -> int:
    left = math.ceil(c["n"] / c["world_size"])  # DistributedSampler, drop_last=False
    steps = 0
    while left > 0:
        left -= min(c["batch"], left)
        steps += 1
    return steps


# ---------------------------------------------------------------------------------------- schedules
@cross_check("fam-pipeline-bubble", "simulate the GPipe schedule slot by slot and measure the idle time")
def _pipeline_bubble(c: Context) -> float:
    stages, micro = c["stages"], c["micro"]
    fwd, bwd = 1.0, 2.0
    f_end = [[0.0] * micro for _ in range(stages)]
    for s in range(stages):
        for m in range(micro):
            ready = max(f_end[s - 1][m] if s else 0.0, f_end[s][m - 1] if m else 0.0)
            f_end[s][m] = ready + fwd
    b_end = [[0.0] * micro for _ in range(stages)]
    for s in reversed(range(stages)):
        for m in range(micro):
            ready = max(
                b_end[s + 1][m] if s + 1 < stages else f_end[stages - 1][micro - 1],
                b_end[s][m - 1] if m else f_end[s][micro - 1],
            )
            b_end[s][m] = ready + bwd
    step = max(b_end[0])
    busy = micro * (fwd + bwd)
    return float(100 * (1 - busy / step))


@cross_check("fam-step-time-overlap", "simulate the 10 DDP buckets' all-reduces one after another")
def _step_time_overlap(c: Context) -> float:
    compute, comm = float(c["compute_ms"]), float(c["comm_ms"])
    if not c["overlap"]:
        return compute + comm
    forward, backward, buckets = compute / 3, 2 * compute / 3, 10
    link_free = 0.0
    for b in range(1, buckets + 1):
        ready = forward + backward * b / buckets
        link_free = max(link_free, ready) + comm / buckets
    return max(compute, link_free)


@cross_check("fam-tp-collective-count", "list each layer's collectives, forward and backward, and count them")
def _tp_collective_count(c: Context) -> int:
    forward_per_layer: list[str] = []
    for _block in ("attention", "mlp"):
        # Colwise then rowwise linear: the rowwise output holds partial sums.
        if c["sp"]:
            forward_per_layer += ["all-gather (before colwise)", "reduce-scatter (after rowwise)"]
        else:
            forward_per_layer += ["all-reduce (after rowwise)"]
    passes = 1 if c["scope"] == "forward" else 2  # backward: one conjugate per forward collective
    return sum(len(forward_per_layer) for _layer in range(c["layers"]) for _pass in range(passes))


# ------------------------------------------------------------------------------ memory, bytes per param
#: Bytes per parameter of mixed-precision Adam's model state, and the ZeRO stage that starts sharding it.
_MODEL_STATE = {"parameters": (2, 3), "gradients": (2, 2), "optimizer": (12, 1)}


def _model_state_gb(params_b: float, stage: int, ranks: int) -> float:
    total = 0.0
    for nbytes, sharded_from in _MODEL_STATE.values():
        total += params_b * nbytes / (ranks if stage >= sharded_from else 1)
    return total


@cross_check("fam-zero-stage-memory", "add parameters, gradients and optimizer state, each sharded or not")
def _zero_stage_memory(c: Context) -> float:
    return _model_state_gb(c["params_b"], c["stage"], c["gpus"])


@cross_check("fam-hsdp-memory", "add the model state, all of it sharded over the shard dimension only")
def _hsdp_memory(c: Context) -> float:
    return _model_state_gb(c["params_b"], 3, c["shard"])


@cross_check("fam-fsdp-sharded-params", "chunk the flat parameters across ranks and size one chunk")
def _fsdp_sharded_params(c: Context) -> float:
    params = round(c["params_b"] * 10**9)
    largest_chunk = -(-params // c["gpus"])
    return float(largest_chunk * c["nbytes"] / 1e9)


@cross_check("fam-checkpoint-size", "add the bytes of every saved tensor per parameter")
def _checkpoint_size(c: Context) -> float:
    tensors = [c["wbytes"]] + ([4, 4] if c["adam"] else [])  # weights, then exp_avg and exp_avg_sq
    return float(sum(c["params_b"] * b for b in tensors))


@cross_check("fam-optimizer-state", "list the optimizer's fp32 state tensors and shard them")
def _optimizer_state(c: Context) -> float:
    state = {"adamw": ["exp_avg", "exp_avg_sq"], "sgdm": ["momentum_buffer"], "sgd": []}[c["opt"]]
    return float(sum(c["params_b"] * 4 / c["ws"] for _ in state))


@cross_check("fam-min-gpus-weights", "add GPUs until the weights fit")
def _min_gpus_weights(c: Context) -> int:
    gpus = 1
    while gpus * c["mem"] < c["params_b"] * c["nbytes"]:
        gpus += 1
    return gpus


@cross_check("fam-ddp-grad-memory", "add the gradients and, unless they are views of them, the buckets")
def _ddp_grad_memory(c: Context) -> float:
    grads = c["params_b"] * c["nbytes"]
    buckets = 0.0 if c["view"] else grads
    return float(grads + buckets)


@cross_check("fam-zero-comm-volume", "list the collectives of one step and add their traffic")
def _zero_comm_volume(c: Context) -> float:
    size = c["params_b"] * 2  # GB of bf16 gradients or parameters
    # An all-reduce is a reduce-scatter plus an all-gather; each moves the whole size once per rank.
    steps = ["reduce-scatter grads", "all-gather"]
    if c["stage"] == 3:
        steps = ["all-gather params (forward)", "all-gather params (backward)", "reduce-scatter grads"]
    return float(sum(size for _ in steps))


# ------------------------------------------------------------------------------- time and throughput
@cross_check("fam-allreduce-time", "add the time of every ring step, one chunk over one link each")
def _allreduce_time(c: Context) -> float:
    # Exact fractions: the answer often lands on a half millisecond, where float noise would flip rounding.
    n = c["world_size"]
    seconds = Fraction(0)
    for _step in range(2 * (n - 1)):
        seconds += Fraction(c["size_gb"]) / n / c["bw"]
    return float(1000 * seconds)


@cross_check("fam-scaling-efficiency", "compare the measured time with the ideal time t1 / gpus")
def _scaling_efficiency(c: Context) -> float:
    ideal = c["t1"] / c["gpus"]
    return float(100 * ideal / c["tn"])


@cross_check("fam-weak-scaling", "compare the measured throughput with gpus x one GPU's")
def _weak_scaling(c: Context) -> float:
    return float(100 * c["tputn"] / (c["tput1"] * c["gpus"]))


@cross_check("fam-amdahl", "time one step of unit length with its serial part unsplit")
def _amdahl(c: Context) -> float:
    serial = c["serial_pct"] / 100
    step_on_n = serial + (1 - serial) / c["gpus"]
    return float(1 / step_on_n)


@cross_check("fam-mfu", "divide the FLOP/s the tokens need by the cluster's peak")
def _mfu(c: Context) -> float:
    needed = c["tokens"] * 6 * c["params_b"] * 1e9
    return float(100 * needed / (989e12 * c["gpus"]))


@cross_check("fam-tokens-per-step", "add the tokens of every micro-batch of every data-parallel rank")
def _tokens_per_step(c: Context) -> float:
    tokens = 0
    for _rank in range(c["dp"]):  # tensor-parallel ranks share their data-parallel rank's tokens
        for _micro_step in range(c["accum"]):
            tokens += c["micro"] * c["seq"]
    return tokens / 1e6


# ------------------------------------------------------------------------------- learning rates
@cross_check("fam-linear-lr-scaling", "keep the learning rate per sample constant")
def _linear_lr(c: Context) -> float:
    per_sample = c["base_lr"] / (c["gpus_from"] * 32)
    return float(per_sample * c["gpus_to"] * 32)


@cross_check("fam-sqrt-lr-scaling", "multiply by the square root of the batch ratio")
def _sqrt_lr(c: Context) -> float:
    return float(c["base_lr"] * math.sqrt(c["batch_to"] / c["batch_from"]))


@cross_check("fam-manual-dp-sum-lr", "add the ranks' equal gradients as the all-reduce does")
def _manual_dp_sum_lr(c: Context) -> float:
    return float(sum(c["lr"] for _ in range(c["world_size"])))


# ----------------------------------------------------------------------------- launch and checkpoints
@cross_check("fam-world-size-basics", "count the training processes the launcher starts")
def _world_size_basics(c: Context) -> int:
    if c["launcher"] != "torchrun":
        return 1  # DataParallel: one process drives every GPU
    return sum(1 for _node in range(c["nodes"]) for _gpu in range(c["gpus"]))


@cross_check("fam-resume-step", "replay the steps and remember the last completed save")
def _resume_step(c: Context) -> int:
    last = 0
    for step in range(1, c["crash"]):  # the crash step never completes
        if step % c["every"] == 0:
            last = step
    return last


@cross_check("fam-sampler-epoch-seed", "replay the epochs and the sampler's epoch attribute")
def _sampler_epoch_seed(c: Context) -> int:
    sampler_epoch = 0
    for epoch in range(c["epoch"] + 1):
        if c["set_epoch"]:
            sampler_epoch = epoch
    return int(c["seed"] + sampler_epoch)


@cross_check("fam-dcp-file-count", "list the files every rank's writer threads create, plus the metadata")
def _dcp_file_count(c: Context) -> int:
    files = {f"__{rank}_{thread}.distcp" for rank in range(c["world_size"]) for thread in range(c["threads"])}
    files.add(".metadata")
    return len(files)


# ------------------------------------------------------------------------------------ parallel layouts
@cross_check("fam-tp-heads-per-rank", "deal the heads to the tensor-parallel ranks and count rank 0's")
def _tp_heads_per_rank(c: Context) -> int:
    owner = [head * c["tp"] // c["heads"] for head in range(c["heads"])]  # contiguous colwise blocks
    return owner.count(0)


@cross_check("fam-layers-per-chunk", "lay the layers over the virtual stages in order and count the first")
def _layers_per_chunk(c: Context) -> int:
    virtual = c["stages"] * c["chunks"]
    owner = [layer * virtual // c["layers"] for layer in range(c["layers"])]
    return owner.count(0)


@cross_check("fam-pipeline-inflight", "walk the first stage's schedule and track the activations held")
def _pipeline_inflight(c: Context) -> int:
    stages, micro = c["stages"], c["micro"]
    if c["sched"] == "gpipe":
        ops = ["F"] * micro + ["B"] * micro
    else:  # 1F1B: the first stage warms up with stages - 1 forwards
        warm = stages - 1
        ops = ["F"] * warm + ["F", "B"] * (micro - warm) + ["B"] * warm
    held = peak = 0
    for op in ops:
        held += 1 if op == "F" else -1
        peak = max(peak, held)
    return peak


@cross_check("fam-collective-latency-steps", "count the ring's passes, or the tree's levels up and down")
def _collective_latency_steps(c: Context) -> int:
    n = c["n"]
    if c["algo"] == "ring":
        return sum(1 for _phase in range(2) for _step in range(n - 1))
    levels, width = 0, 1
    while width < n:
        width *= 2
        levels += 1
    return 2 * levels  # reduce up the tree, broadcast back down


# ------------------------------------------------------------------------------ shapes and placements
def _torch_chunk_lengths(n: int, parts: int) -> list[int]:
    """Slice ``range(n)`` the way torch.chunk (DTensor Shard, DataParallel scatter) does: equal ceil-sized
    slices, so trailing parts may be short or missing.
    """
    size = -(-n // parts)
    items = list(range(n))
    return [len(items[start : start + size]) for start in range(0, n, size)]


@cross_check("fam-dp-scatter-chunks", "slice the batch into ceil-sized pieces, device by device")
def _dp_scatter_chunks(c: Context) -> str:
    return str(_torch_chunk_lengths(c["batch"], c["gpus"]))


@cross_check("fam-dcp-reshard-rows", "slice the rows over the new ranks as Shard(0) does")
def _dcp_reshard_rows(c: Context) -> int:
    lengths = _torch_chunk_lengths(c["rows"], c["new_ws"])
    lengths += [0] * (c["new_ws"] - len(lengths))  # ranks past the last piece hold nothing
    return lengths[0] if c["which"] == "first" else lengths[-1]


@cross_check("fam-dtensor-2d-local-shape", "apply each mesh dimension's placement to the shape in turn")
def _dtensor_2d_local_shape(c: Context) -> str:
    shape = [c["rows"], c["cols"]]
    mesh_sizes = (2, 4)
    placements = c["names"][c["pl"]].strip("[]").split(", ")
    for size, placement in zip(mesh_sizes, placements, strict=True):
        if placement.startswith("Shard("):
            dim = int(placement[len("Shard(") : -1])
            shape[dim] = _torch_chunk_lengths(shape[dim], size)[0]
    return str(shape)


@cross_check("fam-collective-tensor-shape", "stack or split the per-rank inputs")
def _collective_tensor_shape(c: Context) -> str:
    if c["op"] == "ag":
        rows = sum(c["rows"] for _rank in range(c["world_size"]))  # every rank's input, concatenated
    else:
        rows = _torch_chunk_lengths(c["rows"], c["world_size"])[0]
    return str([rows, 4])


@cross_check("fam-fsdp-comm-per-step", "walk forward and backward block by block and list the collectives")
def _fsdp_comm_per_step(c: Context) -> int:
    events: list[str] = []
    for _block in range(c["layers"]):
        events.append("all-gather")  # forward unshards
    for _block in range(c["layers"]):
        if c["reshard"]:
            events.append("all-gather")  # resharded after forward: gather again for backward
        events.append("reduce-scatter")
    wanted = "all-gather" if c["what"] == "gather" else "reduce-scatter"
    return events.count(wanted)


# ------------------------------------------------------------------------------- numerics
@cross_check("fam-gradscaler-scale", "replay GradScaler's update rule step by step")
def _gradscaler_scale(c: Context) -> float:
    scale, tracker = 65536.0, 0
    for step in range(c["overflows"] + c["clean"]):
        if step < c["overflows"]:
            scale *= 0.5  # backoff, and the growth streak restarts
            tracker = 0
        else:
            tracker += 1
            if tracker == 2000:
                scale *= 2.0
                tracker = 0
    return scale


@cross_check("fam-bf16-rounding", "round the bits: float32's top 16 bits to nearest even, or IEEE half")
def _bf16_rounding(c: Context) -> float:
    value = 1 + c["x"]
    if c["dtype"] == "float16":
        return float(struct.unpack("<e", struct.pack("<e", value))[0])
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    lower = bits & 0xFFFF
    upper = bits >> 16
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return float(struct.unpack("<f", struct.pack("<I", upper << 16))[0])


@cross_check("fam-moe-capacity", "spread the routed token slots evenly with exact fractions, then pad")
def _moe_capacity(c: Context) -> int:
    slots = Fraction(c["tokens"] * c["topk"], c["experts"])
    return math.ceil(Fraction(str(c["cf"])) * slots)


# ------------------------------------------------------------------------------- wall-clock estimates
@cross_check("fam-gpu-days", "divide the run's FLOPs by the cluster's sustained FLOP/s, in days")
def _gpu_days(c: Context) -> float:
    flops = 6 * (c["params_b"] * 1e9) * (c["tokens_t"] * 1e12)
    sustained = c["gpus"] * 989e12 * (c["mfu"] / 100)
    return float(flops / sustained / (24 * 3600))


@cross_check("fam-training-days", "divide the tokens by the cluster's tokens per day")
def _training_days(c: Context) -> float:
    per_day = c["tps_gpu"] * c["gpus"] * 24 * 3600
    return float(c["tokens_b"] * 1e9 / per_day)


@cross_check("fam-hsdp-replica-allreduce", "size one rank's reduce-scattered gradient shard")
def _hsdp_replica_allreduce(c: Context) -> float:
    return float(c["params_b"] * c["nbytes"] / c["shard"])


@cross_check("fam-exposed-comm", "lay the step out: hidden communication, then what is left exposed")
def _exposed_comm(c: Context) -> float:
    hideable = c["comp"] * c["ovl"] / 100
    hidden = min(c["comm"], hideable)
    step = c["comp"] + (c["comm"] - hidden)
    return float(100 * c["comp"] / step)


@cross_check("fam-checkpoint-write-time", "split the state over the writers and time one at 2 GB/s")
def _checkpoint_write_time(c: Context) -> float:
    writers = c["ranks"] if c["mode"] == "dcp" else 1
    return float(c["size_gb"] / writers / 2)


@cross_check("fam-cluster-mtbf", "add the nodes' failure rates and invert the sum")
def _cluster_mtbf(c: Context) -> float:
    failures_per_hour = sum(Fraction(1, c["node_mtbf_days"] * 24) for _node in range(c["nodes"]))
    return float(1 / failures_per_hour)


@cross_check("fam-tp-allreduce-size", "count the output elements, two bytes each, in MiB")
def _tp_allreduce_size(c: Context) -> float:
    elements = c["micro"] * c["seq"] * c["hidden"]  # [micro, seq, hidden]
    return float(elements * 2 / 1024 / 1024)


@cross_check("fam-fsdp-peak-params", "add every block's shard and the two gathered blocks")
def _fsdp_peak_params(c: Context) -> float:
    block_gb = c["params_b"] * 2 / c["layers"]
    shards = sum(block_gb / c["world_size"] for _block in range(c["layers"]))
    return float(shards + block_gb + block_gb)  # the current block and the prefetched one


@cross_check("fam-training-flops", "multiply FLOPs per token (6 N) by the tokens, in 1e21")
def _training_flops(c: Context) -> float:
    n = c["params_b"] * 1e9
    tokens = n * c["tokens_per_param"]
    return float(6 * n * tokens / 1e21)


@cross_check("fam-dp-replica-broadcast", "add the fp32 copy sent to each GPU other than GPU 0")
def _dp_replica_broadcast(c: Context) -> float:
    copy_gb = c["params_m"] * 1e6 * 4 / 1e9
    return float(sum(copy_gb for _gpu in range(1, c["gpus"])))
