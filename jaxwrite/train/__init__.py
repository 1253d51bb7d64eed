"""The one trainer: objectives by name, sharded steps, exact resume, SIGTERM checkpoints, metrics, MFU."""
from jaxwrite.train.batches import BATCH_SOURCES, BatchSource
from jaxwrite.train.config import (DistributedConfig, LoggingConfig, OptimizerConfig, TokenizerConfig, TrainConfig,
                                   load_recipe)
from jaxwrite.train.data_config import (DATA_KINDS, ChatSFTData, DataConfig, DegradedPairData, LMCorpusData,
                                        PreferencePoolData)
from jaxwrite.train.defaults import base_config, lm_data, preference_data, sft_data
from jaxwrite.train.hooks import StepInfo
from jaxwrite.train.losses import bradley_terry_loss, masked_next_token_loss
from jaxwrite.train.objectives import OBJECTIVES, Objective, RunContext, data_source
from jaxwrite.train.optim import learning_rate_schedule, make_optimizer
from jaxwrite.train.setup import create_model_and_optimizer, model_config
from jaxwrite.train.step import StepFunctions
from jaxwrite.train.throughput import PEAK_FLOPS_BY_KIND, measure_matmul_peak, mfu, total_peak_flops
from jaxwrite.train.trainer import Trainer, TrainingDiverged, train
from jaxwrite.train.validate import validate_config
from jaxwrite.train.meshes import TARGETS, Target

__all__ = [
    "BATCH_SOURCES", "BatchSource", "TrainConfig", "load_recipe", "TokenizerConfig", "OptimizerConfig",
    "LoggingConfig", "DistributedConfig", "DATA_KINDS", "DataConfig", "LMCorpusData", "ChatSFTData",
    "PreferencePoolData", "DegradedPairData", "base_config", "lm_data", "preference_data", "sft_data",
    "StepInfo", "OBJECTIVES", "Objective", "RunContext", "data_source", "bradley_terry_loss",
    "masked_next_token_loss", "learning_rate_schedule", "make_optimizer", "create_model_and_optimizer",
    "model_config", "StepFunctions", "PEAK_FLOPS_BY_KIND", "measure_matmul_peak", "mfu", "total_peak_flops",
    "Trainer", "TrainingDiverged", "train", "validate_config", "TARGETS", "Target",
]
