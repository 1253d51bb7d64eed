"""Where a run's metrics go besides <workdir>/metrics.jsonl: TensorBoard events and, optionally, Weights &
Biases; and the `jax.profiler` trace window.

The `logging` section (jaxwrite.train.config.LoggingConfig) picks the trackers:
  logging.trackers = ("tensorboard",)   any of: tensorboard, wandb (metrics.jsonl is always written)
  logging.wandb_project = ""            set to log to W&B too (`--config.logging.wandb_project=my-runs`)
  logging.wandb_entity / wandb_run_name / wandb_mode ("" = wandb's own default; "offline" logs locally)
W&B is imported only when asked for. A resumed run continues its W&B run (the id is kept in
<workdir>/wandb_run_id), so a kill and a re-run make one curve, not two.

`profile_steps` = "FIRST,LAST" (or "N" for one step; "" = off; TrainConfig.profile_window) traces steps
FIRST..LAST of a run with `jax.profiler` into <workdir>/tensorboard (plugins/profile/...), beside the scalars, so one
`tensorboard --logdir W/tensorboard` shows both.
"""
from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

from jaxwrite.common import InputError

if TYPE_CHECKING:
    from jaxwrite.train.config import LoggingConfig, TrainConfig

TRACKERS = ("tensorboard", "wandb")
WANDB_ID_FILE = "wandb_run_id"


class Tracker(Protocol):
    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def close(self) -> None: ...


def logging_settings(group: "LoggingConfig") -> tuple[list[str], dict[str, str]]:
    """(tracker names, wandb options); a wandb that is not installed is one line."""
    names = list(group.trackers)
    wandb = {k: getattr(group, f"wandb_{k}") for k in ("project", "entity", "run_name", "mode")}
    if wandb["project"] and "wandb" not in names:
        names.append("wandb")
    if "wandb" in names:
        _import_wandb()
    return names, wandb


def _import_wandb():
    try:
        import wandb
    except ImportError:
        raise InputError("logging to Weights & Biases needs the wandb package: pip install 'jaxwrite[wandb]' "
                         "(or pip install wandb), or leave --config.logging.wandb_project empty",
                         field="logging.wandb_project") from None
    return wandb


class TensorBoardTracker:
    def __init__(self, workdir: str, start_step: int):
        from tensorboardX import SummaryWriter   # slow import (~3 s); only when a run logs

        # purge_step hides events a killed run wrote past the checkpoint we resume from.
        self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=start_step + 1)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for k, v in scalars.items():
            self._tb.add_scalar(k, v, step)
        self._tb.flush()

    def close(self) -> None:
        self._tb.close()


class WandbTracker:
    """One W&B run per workdir: its id is written on first start and reused on resume."""

    def __init__(self, workdir: str, options: dict[str, str], run_config: dict[str, Any]):
        wandb = _import_wandb()
        id_path = os.path.join(workdir, WANDB_ID_FILE)
        if os.path.exists(id_path):
            with open(id_path, encoding="utf-8") as f:
                run_id = f.read().strip()
        else:
            run_id = wandb.util.generate_id()
            with open(id_path, "w", encoding="utf-8") as f:
                f.write(run_id + "\n")
        kwargs = {"project": options["project"], "id": run_id, "resume": "allow", "dir": workdir,
                  "config": run_config, "name": options["run_name"] or os.path.basename(os.path.normpath(workdir))}
        for key in ("entity", "mode"):
            if options[key]:
                kwargs[key] = options[key]
        self._run = wandb.init(**kwargs)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self._run.log(dict(scalars), step=int(step))

    def close(self) -> None:
        self._run.finish()


def make_trackers(config: "TrainConfig", workdir: str, start_step: int) -> list[Tracker]:
    names, wandb = logging_settings(config.logging)
    trackers: list[Tracker] = []
    if "tensorboard" in names:
        trackers.append(TensorBoardTracker(workdir, start_step))
    if "wandb" in names:
        trackers.append(WandbTracker(workdir, wandb, config.to_dict()))
    return trackers


def finite_scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics a tracker can plot: finite numbers (a NaN stays visible in metrics.jsonl)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


# --- the profiler window ------------------------------------------------------------------------------
class ProfileWindow:
    """A trainer hook (every step, and at step 0) that starts a `jax.profiler` trace before step FIRST and
    stops it after step LAST. A run resumed inside the window traces what is left of it."""

    def __init__(self, first: int, last: int, log_dir: str):
        self.first, self.last, self.log_dir = first, last, log_dir
        self.active = False

    def __call__(self, info) -> None:
        import jax
        done = info.step                      # the hook runs after step `done` (0: before the first)
        if not self.active and self.first - 1 <= done < self.last:
            jax.profiler.start_trace(self.log_dir)
            self.active = True
            print(f"profiling steps {max(done + 1, self.first)}..{self.last} into {self.log_dir}", file=sys.stderr)
        elif self.active and done >= self.last:
            self.stop()

    def stop(self) -> None:
        if self.active:
            import jax
            jax.profiler.stop_trace()
            self.active = False
