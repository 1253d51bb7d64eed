"""Chat models: one client interface for every model jaxwrite talks to in turns (the model under test,
a teacher, a judge), answered in process by the inference engine or by any OpenAI-compatible endpoint.

Sits below `evals` and `prep` (which build requests and read answers) and above `infer`. Requests
sample with the engine's `SamplingParams`, re-exported here as the one sampling-settings type.
`ask_until_valid` is the one loop that asks until an answer passes a check (re-asks, permanent errors
asked once, failures recorded by kind); `request_seed` is the one rule for each ask's seed.
`model_spec` / `open_chat_model` resolve a model as every command names it (a URL, a local directory, a
.gguf file or a hub id).
"""
from jaxwrite.chat.interface import (CHAT_SAMPLING, ChatModel, ChatRequest, ChatResult, describe_model,
                                     sampling_fields)
from jaxwrite.chat.ask import Asked, ask_until_valid, request_seed
from jaxwrite.chat.http_model import HttpChatModel
from jaxwrite.chat.local_model import LocalChatModel
from jaxwrite.chat.resolve import ModelSpec, model_spec, open_chat_model
from jaxwrite.infer.sampling import SamplingParams

__all__ = ["CHAT_SAMPLING", "ChatModel", "ChatRequest", "ChatResult", "HttpChatModel", "LocalChatModel",
           "SamplingParams", "describe_model", "sampling_fields",
           "Asked", "ask_until_valid", "request_seed", "ModelSpec", "model_spec", "open_chat_model"]
