"""Multi-host start-up: `jax.distributed` from a config section or the environment.

Ways a run finds its peers, tried in this order:
  1. explicit: `coordinator_address`, `num_processes`, `process_id` (config, else the environment
     variables JAXWRITE_COORDINATOR / JAXWRITE_NUM_PROCESSES / JAXWRITE_PROCESS_ID; JAX's own
     JAX_COORDINATOR_ADDRESS stands in for the coordinator) — GPU and CPU clusters, and the 2-process
     localhost test;
  2. TPU pod slice: on a Cloud TPU VM, plain `jax.distributed.initialize()` reads the slice topology
     from the TPU metadata, so nothing needs configuring;
  3. a cluster JAX detects itself — SLURM (srun with several tasks), Open MPI (mpirun), a Kubernetes
     indexed Job / JobSet (with the `kubernetes` package), or JAX_COORDINATOR_ADDRESS beside one of them:
     `jax.distributed.initialize()` with its own cluster detection, when jaxwrite's variables are not set;
  4. otherwise a single process: nothing to do.
Must run before anything touches a JAX backend. Calling it again is a no-op.
"""
from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any, Mapping

import jax

from jaxwrite.common.errors import InputError

ENV_COORDINATOR = "JAXWRITE_COORDINATOR"
ENV_NUM_PROCESSES = "JAXWRITE_NUM_PROCESSES"
ENV_PROCESS_ID = "JAXWRITE_PROCESS_ID"
ENV_LOCAL_DEVICE_IDS = "JAXWRITE_LOCAL_DEVICE_IDS"
ENV_INIT_TIMEOUT = "JAXWRITE_INIT_TIMEOUT"
DEFAULT_INIT_TIMEOUT_S = 300

# Set by the Cloud TPU runtime / GKE on TPU hosts; any one of them marks a TPU VM.
_TPU_ENV_MARKERS = ("TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "CLOUD_TPU_TASK_ID")
_TPU_DEVICE_FILES = ("/dev/accel0", "/dev/vfio/0")
ENV_JAX_COORDINATOR = "JAX_COORDINATOR_ADDRESS"


class CoordinatorUnreachable(InputError):
    """The coordinator did not answer within the initialisation timeout."""


@dataclasses.dataclass(frozen=True)
class DistributedSettings:
    """How this process joins the run; `mode` is explicit, tpu_auto, cluster_auto or single.

    cluster: for cluster_auto, the cluster JAX will detect (slurm, ompi, k8s)."""
    mode: str
    coordinator_address: str | None = None
    num_processes: int = 1
    process_id: int = 0
    local_device_ids: tuple[int, ...] | None = None
    initialization_timeout: int = DEFAULT_INIT_TIMEOUT_S
    cluster: str | None = None


_KEYS = ("coordinator_address", "num_processes", "process_id", "local_device_ids", "initialization_timeout")


def _section(cfg: Any) -> Mapping[str, Any]:
    """The `distributed` group of a full recipe config, or the group itself; unset fields are None."""
    if cfg is not None and "distributed" in cfg:
        cfg = cfg["distributed"]
    if cfg is None:
        return {}
    return {k: cfg[k] for k in _KEYS if k in cfg}


def _int(value: Any, name: str, source: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError(f"expected an integer, found {value!r}", path=source, field=name) from None


def _device_ids(value: Any, source: str) -> tuple[int, ...] | None:
    if value in (None, "", ()):
        return None
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, int):
        value = [value]
    return tuple(_int(v, "local_device_ids", source) for v in value)


def on_tpu_vm() -> bool:
    """True on a Cloud TPU VM / GKE TPU node (checked without starting a JAX backend)."""
    return any(os.environ.get(k) for k in _TPU_ENV_MARKERS) or any(os.path.exists(p) for p in _TPU_DEVICE_FILES)


def _count(env: Mapping[str, str], key: str) -> int | None:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return None


def detect_cluster(env: Mapping[str, str], has_kubernetes: bool | None = None) -> tuple[str, int | None] | None:
    """(cluster, its process count if the environment says) for a multi-process cluster that
    `jax.distributed.initialize()` detects by itself, else None. The markers are the ones JAX's cluster
    plugins read; a cluster of one process (a one-task SLURM step, `mpirun -n 1`) is no cluster here."""
    if all(k in env for k in ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
                              "SLURM_LOCALID")):
        count = _count(env, "SLURM_NTASKS")
        if count is None or count > 1:
            return "slurm", count
    if "OMPI_MCA_orte_hnp_uri" in env:
        count = _count(env, "OMPI_COMM_WORLD_SIZE")
        if count is None or count > 1:
            return "ompi", count
    # Every pod has KUBERNETES_SERVICE_HOST (notebook servers too); an indexed Job or JobSet pod also has
    # JOB_COMPLETION_INDEX, and JAX's plugin needs the kubernetes package to find its peers.
    if "KUBERNETES_SERVICE_HOST" in env and "JOB_COMPLETION_INDEX" in env:
        if has_kubernetes is None:
            import importlib.util
            has_kubernetes = importlib.util.find_spec("kubernetes") is not None
        if has_kubernetes:
            return "k8s", None
    return None


def resolve_settings(cfg: Any = None, environ: Mapping[str, str] | None = None,
                     tpu_vm: bool | None = None, has_kubernetes: bool | None = None) -> DistributedSettings:
    """Settings from `cfg` (a `distributed` config group or a recipe holding one), then the environment.

    Config values win over environment variables; `tpu_vm` and `has_kubernetes` override detection
    (for tests). Nothing here starts JAX.
    """
    env = os.environ if environ is None else environ
    section = _section(cfg)

    def pick(key: str, env_key: str) -> tuple[Any, str]:
        value = section.get(key)
        if value not in (None, ""):
            return value, f"config distributed.{key}"
        return env.get(env_key), f"${env_key}"

    timeout_raw, timeout_src = pick("initialization_timeout", ENV_INIT_TIMEOUT)
    timeout = DEFAULT_INIT_TIMEOUT_S if timeout_raw in (None, "") else _int(timeout_raw, "initialization_timeout",
                                                                             timeout_src)
    if timeout <= 0:
        raise InputError(f"expected a positive number of seconds, found {timeout}", path=timeout_src,
                         field="initialization_timeout")
    coordinator, _ = pick("coordinator_address", ENV_COORDINATOR)
    num_raw, num_src = pick("num_processes", ENV_NUM_PROCESSES)
    pid_raw, pid_src = pick("process_id", ENV_PROCESS_ID)
    if not coordinator and num_raw not in (None, "") and env.get(ENV_JAX_COORDINATOR):
        coordinator = env[ENV_JAX_COORDINATOR]   # JAX's own variable, with jaxwrite's count and id
    ids_raw, ids_src = pick("local_device_ids", ENV_LOCAL_DEVICE_IDS)
    local_ids = _device_ids(ids_raw, ids_src)

    if coordinator:
        if ":" not in str(coordinator):
            raise InputError(f"expected HOST:PORT, found {coordinator!r}", field="coordinator_address")
        missing = [n for n, v in (("num_processes", num_raw), ("process_id", pid_raw)) if v in (None, "")]
        if missing:
            raise InputError(f"a coordinator address needs {' and '.join(missing)} too (config distributed.* or "
                             f"${ENV_NUM_PROCESSES} / ${ENV_PROCESS_ID})", field=missing[0])
        num = _int(num_raw, "num_processes", num_src)
        pid = _int(pid_raw, "process_id", pid_src)
        if num < 1 or not 0 <= pid < num:
            raise InputError(f"expected 0 <= process_id < num_processes, found process_id={pid}, "
                             f"num_processes={num}", field="process_id")
        if num == 1:
            return DistributedSettings("single", initialization_timeout=timeout)
        return DistributedSettings("explicit", str(coordinator), num, pid, local_ids, timeout)
    if num_raw not in (None, "") and _int(num_raw, "num_processes", num_src) > 1:
        raise InputError(f"{num_raw} processes need a coordinator address (config distributed.coordinator_address "
                         f"or ${ENV_COORDINATOR}=HOST:PORT of process 0)", field="coordinator_address")
    if on_tpu_vm() if tpu_vm is None else tpu_vm:
        return DistributedSettings("tpu_auto", initialization_timeout=timeout)
    cluster = detect_cluster(env, has_kubernetes)
    if cluster is not None:
        name, count = cluster
        return DistributedSettings("cluster_auto", env.get(ENV_JAX_COORDINATOR) or None, count or 0, 0, local_ids,
                                   timeout, cluster=name)
    if env.get(ENV_JAX_COORDINATOR):
        raise InputError(f"${ENV_JAX_COORDINATOR} is set but nothing gives this process's count and id: run under "
                         f"SLURM (srun), mpirun or a Kubernetes indexed Job, or set ${ENV_NUM_PROCESSES} and "
                         f"${ENV_PROCESS_ID} too", field="num_processes")
    return DistributedSettings("single", initialization_timeout=timeout)


def _wait_for_port(address: str, timeout_s: float) -> str | None:
    """Polls a TCP connect to HOST:PORT until it succeeds (None) or `timeout_s` passes (last error)."""
    host, port = address.rsplit(":", 1)
    host = host.strip("[]")
    deadline = time.monotonic() + timeout_s
    error = "no attempt"
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(5.0, timeout_s)):
                return None
        except OSError as err:
            error = f"{type(err).__name__}: {err}"
        if time.monotonic() >= deadline:
            return error
        time.sleep(0.5)


def _unreachable(settings: DistributedSettings, detail: str) -> CoordinatorUnreachable:
    return CoordinatorUnreachable(
        f"process {settings.process_id}/{settings.num_processes} could not reach the coordinator "
        f"{settings.coordinator_address} within {settings.initialization_timeout}s ({detail}); check that "
        f"process 0 is running with the same address and num_processes, that HOST resolves and PORT is open "
        f"between hosts (firewall), and that no *_proxy variable intercepts it; raise "
        f"distributed.initialization_timeout or ${ENV_INIT_TIMEOUT} if workers start slowly")


def initialize_distributed(cfg: Any = None) -> DistributedSettings:
    """Joins the multi-process run described by `cfg` / the environment; returns the settings used.

    No-op for a single process and when jax.distributed is already initialised. Raises
    CoordinatorUnreachable (a one-line InputError) when the coordinator does not answer in time.
    """
    settings = resolve_settings(cfg)
    if jax.distributed.is_initialized():
        return dataclasses.replace(settings, num_processes=jax.process_count(), process_id=jax.process_index())
    if settings.mode == "single":
        return settings
    if settings.mode == "tpu_auto":
        try:
            jax.distributed.initialize(initialization_timeout=settings.initialization_timeout)
        except Exception as err:  # noqa: BLE001 - re-raised as one line with what to check
            first_line = str(err).splitlines()[0] if str(err) else ""
            raise CoordinatorUnreachable(
                f"TPU pod-slice auto-detection failed ({type(err).__name__}: {first_line}); "
                f"run the same command on every worker (gcloud ... ssh --worker=all), or set "
                f"${ENV_COORDINATOR}, ${ENV_NUM_PROCESSES}, ${ENV_PROCESS_ID} explicitly") from None
        return dataclasses.replace(settings, num_processes=jax.process_count(), process_id=jax.process_index())
    if settings.mode == "cluster_auto":
        try:   # JAX's own detection fills in the coordinator, the count and this process's id
            jax.distributed.initialize(
                coordinator_address=settings.coordinator_address,
                local_device_ids=list(settings.local_device_ids) if settings.local_device_ids else None,
                initialization_timeout=settings.initialization_timeout)
        except Exception as err:  # noqa: BLE001 - re-raised as one line with what to check
            first_line = str(err).splitlines()[0] if str(err) else ""
            raise CoordinatorUnreachable(
                f"{settings.cluster} cluster start-up through jax.distributed.initialize() failed "
                f"({type(err).__name__}: {first_line}); start every process the same way (srun / mpirun / "
                f"the Job's pods), or set ${ENV_COORDINATOR}, ${ENV_NUM_PROCESSES}, ${ENV_PROCESS_ID} "
                f"explicitly") from None
        return dataclasses.replace(settings, num_processes=jax.process_count(), process_id=jax.process_index())
    if settings.process_id != 0:
        # Fail with a readable message before the runtime client, whose own timeout error is opaque.
        error = _wait_for_port(settings.coordinator_address, settings.initialization_timeout)
        if error is not None:
            raise _unreachable(settings, error)
    try:
        jax.distributed.initialize(
            coordinator_address=settings.coordinator_address, num_processes=settings.num_processes,
            process_id=settings.process_id,
            local_device_ids=list(settings.local_device_ids) if settings.local_device_ids else None,
            cluster_detection_method="deactivate", initialization_timeout=settings.initialization_timeout)
    except Exception as err:  # noqa: BLE001 - re-raised as one line with what to check
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise _unreachable(settings, f"{type(err).__name__}: {text}") from None
    return settings


def shutdown_distributed() -> None:
    """Leaves the run cleanly (lets the coordinator see an orderly exit instead of a lost heartbeat)."""
    if jax.distributed.is_initialized():
        jax.distributed.shutdown()


def process_shard(cfg: Any = None):
    """This process's share of a record job (`generate`, the evaluators), as `train` splits its batches:
    joins the cluster described by `cfg` / the environment (initialize_distributed), then takes
    jax.process_index() of jax.process_count(). A single process gets the whole job and touches no JAX
    backend. The barrier is a device sync across every process (jax.experimental.multihost_utils)."""
    from jaxwrite.common.record_job import ProcessShard

    settings = initialize_distributed(cfg)
    if settings.mode == "single" and not jax.distributed.is_initialized():
        return ProcessShard()
    from jax.experimental import multihost_utils

    calls = iter(range(1 << 30))
    return ProcessShard(jax.process_index(), jax.process_count(),
                        barrier=lambda: multihost_utils.sync_global_devices(f"jaxwrite-record-job-{next(calls)}"))


def process_local_rows(global_rows: int) -> slice:
    """The slice of a global batch's rows this process feeds (contiguous, process order)."""
    count = jax.process_count()
    if global_rows % count:
        raise ValueError(f"global batch of {global_rows} rows is not divisible by {count} processes")
    per = global_rows // count
    return slice(jax.process_index() * per, (jax.process_index() + 1) * per)


__all__ = ["CoordinatorUnreachable", "DistributedSettings", "detect_cluster", "initialize_distributed", "on_tpu_vm",
           "process_local_rows", "process_shard", "resolve_settings", "shutdown_distributed"]
