"""Meshes, logical-axis sharding rules and multi-host initialisation."""
from jaxwrite.parallel.accumulation import accumulating_gradients, gradients_accumulate
from jaxwrite.parallel.distributed import (CoordinatorUnreachable, DistributedSettings, detect_cluster,
                                          initialize_distributed, on_tpu_vm, process_local_rows, process_shard,
                                          resolve_settings, shutdown_distributed)
from jaxwrite.parallel.mesh import MESH_AXES, make_mesh, resolve_mesh_shape
from jaxwrite.parallel.rules import (DECODE_RULES, DEFAULT_RULES, active_mesh_rules, constrain, logical_sharding,
                                     logical_to_spec, shard_model, state_shardings, use_mesh_rules, use_rules_only,
                                     variable_axes)

__all__ = [
    "accumulating_gradients", "gradients_accumulate",
    "CoordinatorUnreachable", "DistributedSettings", "detect_cluster", "initialize_distributed", "on_tpu_vm",
    "process_local_rows", "process_shard",
    "resolve_settings", "shutdown_distributed",
    "MESH_AXES", "make_mesh", "resolve_mesh_shape", "DECODE_RULES", "DEFAULT_RULES", "active_mesh_rules", "constrain",
    "logical_sharding", "logical_to_spec", "shard_model", "state_shardings", "use_mesh_rules", "use_rules_only",
    "variable_axes",
]
