"""Inference: batched prefill/decode with a KV cache, sampling, stop strings, group sampling,
JSON-schema-constrained decoding, the non-official score-logit judge mode, and the OpenAI-compatible
server."""
from jaxwrite.infer.engine import Engine, EngineStats
from jaxwrite.infer.byte_automaton import Budget, ByteDFA, SchemaError
from jaxwrite.infer.json_schema_dfa import JSON_OBJECT, compile_schema
from jaxwrite.infer.loading import load_for_inference
from jaxwrite.infer.requests import Completion, FinishReason, GenerationRequest, TokenLogprob
from jaxwrite.infer.sampling import SamplingParams
from jaxwrite.infer.score_logit import MODE as SCORE_LOGIT_MODE
from jaxwrite.infer.score_logit import ScoreDistribution, ScoreReader
from jaxwrite.infer.http_app import Limits
from jaxwrite.infer.server import InferenceServer, ServeSettings
from jaxwrite.infer.stops import find_stop
from jaxwrite.infer.token_constraint import ConstraintLimits, ConstraintSet, TokenConstraint, vocab_bytes

__all__ = [
    "Completion", "FinishReason", "TokenLogprob", "Engine", "EngineStats", "GenerationRequest", "SamplingParams",
    "ByteDFA", "Budget", "SchemaError", "JSON_OBJECT", "compile_schema", "ConstraintLimits", "ConstraintSet",
    "TokenConstraint", "vocab_bytes",
    "SCORE_LOGIT_MODE", "ScoreDistribution", "ScoreReader", "load_for_inference", "InferenceServer",
    "Limits", "ServeSettings", "find_stop",
]
