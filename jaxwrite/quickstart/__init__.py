"""`jaxwrite quickstart`: the whole system end to end on a CPU with a tiny model."""
from jaxwrite.quickstart.run import run_quickstart

__all__ = ["run_quickstart"]
