"""Chat models: one client interface for every model jaxwrite talks to in turns (the model under test,
a teacher, a judge), answered in process by the inference engine or by any OpenAI-compatible endpoint.

Sits below `evals` and `prep` (which build requests and read answers) and above `infer`. Requests
sample with the engine's `SamplingParams`, re-exported here as the one sampling-settings type.
"""
from jaxwrite.chat.interface import (CHAT_SAMPLING, ChatModel, ChatRequest, ChatResult, describe_model,
                                     sampling_fields)
from jaxwrite.chat.http_model import HttpChatModel
from jaxwrite.chat.local_model import LocalChatModel
from jaxwrite.infer.sampling import SamplingParams

__all__ = ["CHAT_SAMPLING", "ChatModel", "ChatRequest", "ChatResult", "HttpChatModel", "LocalChatModel",
           "SamplingParams", "describe_model", "sampling_fields"]
