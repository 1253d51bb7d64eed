"""Vendor attention kernels behind the AttentionMask interface: splash (TPU, Pallas) and cuDNN flash (GPU).

Both cover the no-cache causal pass (training, scoring a whole sequence); the engine's cache passes
run blockwise or reference attention (`attention.attend` routes them).

splash: the Pallas TPU kernels shipped with JAX (`jax.experimental.pallas.ops.tpu.splash_attention`)
with a static causal mask (fully masked blocks are skipped in the kernel grid) and the mask's segment
ids for packing and padding. Under an active jaxwrite mesh it runs inside `shard_map` over the batch
(and heads when the tensor axis divides both head counts), because the partitioner cannot split a
Pallas call itself.

cudnn: `jax.nn.dot_product_attention(implementation="cudnn")`. Causal + right padding goes through
sequence lengths (no mask array); packed rows need a dense [B, 1, T, S] mask, which is why
`auto` prefers blockwise for packed batches on GPU.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxwrite.models.attention_mask import AttentionMask
from jaxwrite.parallel import active_mesh_rules, logical_to_spec

LANES = 128   # splash block sizes are multiples of the TPU lane width
# Named scope around every splash call jaxwrite makes: its mask is causal. It reaches the compiled HLO
# as op_name metadata, which is how jaxwrite.aot counts the kernel's FLOPs (only visible blocks run).
SPLASH_CAUSAL_SCOPE = "jaxwrite_splash_causal"


def splash_block(seq: int, block: int) -> int:
    """Splash block size for `seq` tokens: `block` rounded down to the lane width, never longer than
    the sequence rounded up to it."""
    unit = max(LANES, block // LANES * LANES)
    return min(unit, -(-seq // LANES) * LANES)


def _splash_kernel(heads: int, seq: int, block: int, interpret: bool):
    from jax.experimental.pallas.ops.tpu import splash_attention as sa
    mask = sa.MultiHeadMask([sa.CausalMask((seq, seq)) for _ in range(heads)])
    sizes = sa.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block, block_q_dkv=block,
                          block_kv_dkv=block, block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
    # Built inside each trace (its mask tables become constants of that trace): a kernel cached across
    # traces would leak one trace's arrays into the next.
    return sa.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)


def splash_usable(head_dim: int) -> bool:
    """Head sizes splash tiles without padding: multiples of the lane width (Qwen2.5 and Llama-3: 128)."""
    return head_dim % LANES == 0


def splash_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, block: int = 512,
                     interpret: bool = False) -> jax.Array:
    """q [B, T, N, H]; k, v [B, K, T, H]; a self-causal mask.
    Returns [B, T, N, H]. interpret=True runs the kernel in the Pallas interpreter (CPU tests)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import SegmentIds
    if not mask.self_causal:
        raise ValueError("splash attention covers no-cache causal passes only")
    batch, seq, heads, hd = q.shape
    b = splash_block(seq, block)
    padded = mask.pad_to(b)
    pad = padded.seq - seq
    # Splash does not scale scores; heads before positions ([B, N, T, H]; k, v already are).
    qt = jnp.transpose(q * jnp.asarray(hd ** -0.5, q.dtype), (0, 2, 1, 3))
    kt, vt = k.astype(q.dtype), v.astype(q.dtype)
    if pad:
        widths = [(0, 0), (0, 0), (0, pad), (0, 0)]
        qt, kt, vt = (jnp.pad(x, widths) for x in (qt, kt, vt))

    def local(qt, kt, vt, q_seg, kv_seg):   # one shard: [B_local, N_local, T, H], [B_local, T]
        kernel = _splash_kernel(qt.shape[1], qt.shape[2], b, interpret)
        one = lambda q1, k1, v1, qs, ks: kernel(q1, k1, v1, segment_ids=SegmentIds(qs, ks))
        with jax.named_scope(SPLASH_CAUSAL_SCOPE):
            return jax.vmap(one)(qt, kt, vt, q_seg, kv_seg)

    args = (qt, kt, vt, padded.q_segment, padded.kv_segment)
    active = active_mesh_rules()
    if active is None:
        out = local(*args)
    else:
        mesh, rules = active
        batch_spec = logical_to_spec(("batch",), (batch,), mesh, rules)[0]
        head_spec = logical_to_spec(("act_heads",), (heads,), mesh, rules)[0]
        kv_spec = logical_to_spec(("act_heads",), (k.shape[1],), mesh, rules)[0]
        if head_spec != kv_spec:   # GQA groups must stay whole inside a shard
            head_spec = None
        x_spec, seg_spec = P(batch_spec, head_spec, None, None), P(batch_spec, None)
        out = jax.shard_map(local, mesh=mesh, in_specs=(x_spec, x_spec, x_spec, seg_spec, seg_spec),
                            out_specs=x_spec, check_vma=False)(*args)
    return jnp.transpose(out[:, :, :seq], (0, 2, 1, 3))


def cudnn_usable(dtype, head_dim: int) -> bool:
    """What cuDNN's fused attention accepts: half precision, head_dim a multiple of 8 up to 128."""
    return jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)) and head_dim % 8 == 0 \
        and head_dim <= 128


def cudnn_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask) -> jax.Array:
    """q [B, T, N, H]; k, v [B, K, S, H]. Returns [B, T, N, H]."""
    k, v = (jnp.swapaxes(x, 1, 2).astype(q.dtype) for x in (k, v))             # JAX's [B, S, K, H]
    if mask.self_causal and not mask.packed:
        # Right-padded rows (every jaxwrite batch): valid tokens are a prefix of each row.
        lengths = (mask.kv_segment != 0).sum(-1).astype(jnp.int32)             # [B]
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, query_seq_lengths=lengths,
                                            key_value_seq_lengths=lengths, implementation="cudnn")
    return jax.nn.dot_product_attention(q, k, v, mask=mask.dense()[:, None], implementation="cudnn")
