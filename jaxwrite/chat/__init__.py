"""Chat models: one client interface for every model jaxwrite talks to in turns (the model under test,
a teacher, a judge), answered in process by the inference engine or by any OpenAI-compatible endpoint.

Sits below `evals` and `prep` (which build requests and read answers) and above `infer`. Requests
sample with the engine's `SamplingParams`, re-exported here as the one sampling-settings type.
`ask_until_valid` is the one loop that asks until an answer passes a check (re-asks, permanent errors
asked once, failures recorded by kind); `request_seed` is the one rule for each ask's seed.
`model_spec` / `open_chat_model` resolve a model as every command names it (a URL, a local directory, a
.gguf file or a hub id). `MeteredChatModel` is the layer every command's model calls pass through: the
judge-call cache (`CallCache`, one SQLite file) and the usage meter (`Usage`: requests, tokens, time,
cost at `Prices`).
"""
from jaxwrite.chat.interface import (CHAT_SAMPLING, ChatModel, ChatRequest, ChatResult, describe_model,
                                     model_identity, sampling_fields)
from jaxwrite.chat.ask import Asked, ask_until_valid, request_seed
from jaxwrite.chat.http_model import HttpChatModel
from jaxwrite.chat.local_model import LocalChatModel
from jaxwrite.chat.resolve import ModelSpec, model_spec, open_chat_model
from jaxwrite.chat.cache import CallCache, default_cache_path
from jaxwrite.chat.usage import Prices, Usage, parse_price, prices_from
from jaxwrite.chat.metered import MeteredChatModel, metered
from jaxwrite.infer.sampling import SamplingParams

__all__ = ["CHAT_SAMPLING", "ChatModel", "ChatRequest", "ChatResult", "HttpChatModel", "LocalChatModel",
           "SamplingParams", "describe_model", "model_identity", "sampling_fields",
           "CallCache", "default_cache_path", "Prices", "Usage", "parse_price", "prices_from", "MeteredChatModel",
           "metered",
           "Asked", "ask_until_valid", "request_seed", "ModelSpec", "model_spec", "open_chat_model"]
