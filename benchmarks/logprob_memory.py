"""Compiled HBM of the token log-prob implementations (value + gradients) on one TPU chip, via libtpu's
compile-only devices: no TPU needed, the real compiler (Mosaic for the Pallas kernels) decides.

  python benchmarks/logprob_memory.py [--topology v5p:1x1x1] [--json out.json]

Prints, per (N tokens, D hidden, V vocabulary) and implementation, the per-device temporary bytes the
compiled program needs besides its arguments and outputs; `jaxwrite.kernels` lets `auto` pick the
implementation with the least (its table, _measured.py, holds these figures).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
if "tpu" not in os.environ.get("JAX_PLATFORMS", "tpu"):
    os.environ.pop("JAX_PLATFORMS")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from jaxwrite.common import building_for  # noqa: E402
from jaxwrite.kernels import token_logprobs  # noqa: E402
from jaxwrite.parallel import make_mesh, use_rules_only  # noqa: E402
from jaxwrite.parallel.chips import parse_topology, topology_devices  # noqa: E402

SIZES = ((4096, 2048, 152064), (4096, 3584, 152064), (16384, 5120, 152064))
IMPLS = ("reference", "chunked", "pallas")


def compiled_memory(impl: str, n: int, d: int, v: int, device) -> dict:
    def loss(h, w, ids):
        logp, entropy = token_logprobs(h, w, ids, impl=impl)
        return logp.sum() + 0.01 * entropy.sum()

    one = NamedSharding(jax.sharding.Mesh([device], ("x",)), PartitionSpec())
    args = (jax.ShapeDtypeStruct((n, d), jnp.bfloat16, sharding=one),
            jax.ShapeDtypeStruct((d, v), jnp.bfloat16, sharding=one),
            jax.ShapeDtypeStruct((n,), jnp.int32, sharding=one))
    # The one-chip mesh made active tells the kernels which chip they are built for (its VMEM).
    with building_for("tpu"), use_rules_only(make_mesh((1, 1, 1), [device])):
        compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(*args).compile()
    mem = compiled.memory_analysis()
    return {"impl": impl, "n": n, "d": d, "v": v, "temp_bytes": int(mem.temp_size_in_bytes),
            "argument_bytes": int(mem.argument_size_in_bytes), "output_bytes": int(mem.output_size_in_bytes)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="v5p:1x1x1")
    parser.add_argument("--json", default="")
    parser.add_argument("--sizes", default="", help="N,D,V[;N,D,V...] instead of the default sizes")
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in one.split(",")) for one in args.sizes.split(";")] if args.sizes else SIZES
    device = topology_devices(parse_topology(args.topology))[0]
    rows = []
    print(f"| N | D | V | {' | '.join(f'{i} temp MiB' for i in IMPLS)} |")
    print("|---|---|---|" + "---|" * len(IMPLS))
    for n, d, v in sizes:
        found = [compiled_memory(impl, n, d, v, device) for impl in IMPLS]
        rows += found
        print(f"| {n:,} | {d:,} | {v:,} | " + " | ".join(f"{r['temp_bytes'] / 2**20:,.0f}" for r in found) + " |",
              flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"topology": args.topology, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
