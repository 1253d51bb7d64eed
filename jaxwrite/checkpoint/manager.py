"""Training checkpoints: model, optimiser state, step, RNG key and data-iterator state, via Orbax.

Layout under `directory`:  <step>/model, <step>/opt (Orbax arrays), <step>/meta (JSON: step, RNG key
data, opaque data-iterator state, extra run info). Saves are asynchronous (training continues while
arrays are written) and atomic (Orbax commits a step by renaming its temporary folder), so a kill
mid-save leaves the previous step as the latest. `wait()` / `close()` make pending saves durable.
"""
from __future__ import annotations

import base64
import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.checkpoint._trees import abstract_target, check_matches, to_pure
from jaxwrite.common import InputError
from jaxwrite.common.remote import is_remote
from jaxwrite.parallel import DEFAULT_RULES

@dataclasses.dataclass
class RestoredRun:
    """What a restore hands back besides the arrays it wrote into the model and optimiser."""
    step: int
    rng: jax.Array              # typed PRNG key
    data_state: Any             # as given to save(): JSON-like object or bytes
    extra: dict


def encode_data_state(state: Any) -> Any:
    """JSON-safe form of an opaque data-iterator state (bytes are base64-wrapped)."""
    if isinstance(state, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(state)).decode("ascii")}
    return state


def decode_data_state(blob: Any) -> Any:
    if isinstance(blob, dict) and set(blob) == {"__bytes__"}:
        return base64.b64decode(blob["__bytes__"])
    return blob


class Checkpointer:
    """Keeps the last `keep` training checkpoints in `directory` (created if absent)."""

    def __init__(self, directory: str | os.PathLike, keep: int = 3, async_save: bool = True):
        # A bucket path (gs://...) goes to Orbax as it is: it writes there through tensorstore itself.
        directory = os.fspath(directory)
        self.directory = directory if is_remote(directory) else os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                               enable_async_checkpointing=async_save)
        # Handlers named up front, so a fresh process can read item metadata before any save.
        handlers = {"model": ocp.StandardCheckpointHandler(), "opt": ocp.StandardCheckpointHandler(),
                    "meta": ocp.JsonCheckpointHandler()}
        self._manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=handlers)

    # --- queries ------------------------------------------------------------------------------
    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    # --- save ---------------------------------------------------------------------------------
    def save(self, step: int, model: nnx.Module, optimizer: nnx.Optimizer | None, rng: jax.Array,
             data_state: Any = None, extra: dict | None = None) -> None:
        """Starts an (async) save of everything needed to continue exactly after `step`."""
        key_data = jax.random.key_data(rng)
        meta = {"step": int(step), "rng": [int(x) for x in jax.device_get(key_data).ravel()],
                "rng_impl": str(jax.random.key_impl(rng)),
                "data_state": encode_data_state(data_state), "extra": extra or {}}
        args = {"model": ocp.args.StandardSave(to_pure(nnx.state(model))),
                "meta": ocp.args.JsonSave(meta)}
        if optimizer is not None:
            args["opt"] = ocp.args.StandardSave(to_pure(nnx.state(optimizer)))
        self._manager.save(int(step), args=ocp.args.Composite(**args), force=True)

    def wait(self) -> None:
        """Blocks until pending saves are committed to disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()

    # --- restore ------------------------------------------------------------------------------
    def restore(self, model: nnx.Module, optimizer: nnx.Optimizer | None = None, step: int | None = None,
                mesh: Mesh | None = None, rules=DEFAULT_RULES) -> RestoredRun:
        """Restores `step` (default: latest) into `model` / `optimizer` in place, laid out on `mesh`.

        Shapes are checked against the checkpoint's metadata first, so a config mismatch is one line
        naming the parameter instead of an Orbax traceback. The mesh may differ from the one saved with.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise InputError("no checkpoint found", path=self.directory)
        where = os.path.join(self.directory, str(step))
        metadata = self._manager.item_metadata(step)
        targets = {"model": abstract_target(nnx.state(model), mesh, rules)}
        if optimizer is not None:
            targets["opt"] = abstract_target(nnx.state(optimizer), mesh, rules)
        for name, target in targets.items():
            found = metadata[name] if name in metadata.keys() else None
            if found is None:
                raise InputError(f"checkpoint has no '{name}' item", path=where)
            found = getattr(found, "tree", found)
            check_matches(target, found, "parameter" if name == "model" else "optimizer state", where)
        args = {name: ocp.args.StandardRestore(t) for name, t in targets.items()}
        args["meta"] = ocp.args.JsonRestore()
        restored = self._manager.restore(step, args=ocp.args.Composite(**args))
        nnx.update(model, restored["model"])
        if optimizer is not None:
            nnx.update(optimizer, restored["opt"])
        meta = restored["meta"]
        key_data = jnp.asarray(meta["rng"], dtype=jnp.uint32)
        rng = jax.random.wrap_key_data(key_data, impl=meta.get("rng_impl") or None)
        return RestoredRun(step=int(meta["step"]), rng=rng, data_state=decode_data_state(meta["data_state"]),
                           extra=meta.get("extra", {}))
