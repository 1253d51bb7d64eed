"""What a GRPO run needs before its first rollout: a policy to start from and a trained reward model.

When `model.init_from` / `rl.rm_path` are empty and the recipe names `rl.policy_recipe` / `rl.rm_recipe`,
those recipes are trained first with the one trainer into <workdir>/policy_init and <workdir>/rm
(resumable like any run; a finished one is reused), and the GRPO config is pointed at them. A run whose
`model.init_from` names a pretrained checkpoint trains its reward model from that checkpoint too (its
architecture, weights as the backbone, and tokenizer), unless the RM recipe names its own. With
`rl.policy_recipe_from_init` the policy recipe also runs from that checkpoint: a pretrained instruct model
is warmed up on the think/answer protocol (an SFT recipe on rl/protocol_docs.py's chat records) before RL.
"""
from __future__ import annotations

import os
import sys

import ml_collections

from jaxwrite.common import load_config
from jaxwrite.train import TrainConfig


def _train_dependency(recipe: str, steps: int, workdir: str, config: TrainConfig,
                      protocol_docs: int = 0, overrides=(), init_from: str = "") -> str:
    from jaxwrite.train import train

    dep = load_config(recipe, list(overrides))  # a path or a shipped recipe name
    dep.data_dir = config.data_dir
    dep.seed = config.seed
    dep.progress_bar = config.progress_bar
    if init_from and not dep.model.init_from:
        # The run's pretrained checkpoint: the dependency takes its architecture, weights and tokenizer.
        dep.model.init_from = init_from
        dep.tokenizer.path = config.tokenizer.path
    if steps:
        dep.num_steps = steps
    if protocol_docs and dep.data.kind == "chat_sft":
        # An SFT warm-up: the protocol records are its training data, rendered by the model's chat
        # template exactly as a "chat"-template rollout renders its prompt.
        from jaxwrite.rl.protocol_docs import write_protocol_chat_records
        path = os.path.join(workdir, "protocol_records.jsonl")
        if not os.path.exists(path):
            task = config.rl.length_task
            write_protocol_chat_records(config.data_dir, path, protocol_docs, task.min_words, task.max_words,
                                        seed=config.seed, zh_fraction=task.zh_fraction)
        dep.data.train_path = path
    elif protocol_docs:
        from jaxwrite.rl.protocol_docs import write_protocol_docs
        path = os.path.join(workdir, "protocol_docs.jsonl")
        if not os.path.exists(path):
            task = config.rl.length_task
            write_protocol_docs(config.data_dir, path, protocol_docs, task.min_words, task.max_words,
                                seed=config.seed, zh_fraction=task.zh_fraction)
        dep.data.extra_sources["long_cot"] = ml_collections.ConfigDict(
            {"kind": "jsonl", "path": path, "field": "text", "weight": config.rl.protocol_weight})
    print(f"grpo: training {os.path.basename(recipe)} into {workdir}", file=sys.stderr)
    status = train(dep, workdir)
    if status:
        raise RuntimeError(f"dependency {recipe} stopped with status {status}")
    return workdir


def prepare_grpo(config: TrainConfig, workdir: str) -> TrainConfig:
    """Returns a copy of `config` whose policy and reward model exist (training them if needed)."""
    rl = config.rl
    pretrained = config.model.init_from   # the user's checkpoint, before a policy recipe fills it
    if rl.policy_recipe and (not pretrained or rl.policy_recipe_from_init):
        policy = _train_dependency(rl.policy_recipe, rl.policy_recipe_steps,
                                   os.path.join(workdir, "policy_init"), config, rl.protocol_docs,
                                   rl.policy_recipe_overrides, init_from=pretrained)
        # The warm-up is done: the returned config starts from it and must not warm it up again when
        # prepared a second time (the trainer prepares whatever config it is given).
        config = config.updated({"model.init_from": os.path.join(policy, "checkpoints"),
                                 "rl.policy_recipe_from_init": False})
        if not config.tokenizer.path:
            config = config.updated({"tokenizer.path": os.path.join(policy, "checkpoints", "tokenizer")})
    if "writing_rm" in rl.rewards and not rl.rm_path and rl.rm_recipe:
        config = config.updated({"rl.rm_path": os.path.join(
            _train_dependency(rl.rm_recipe, rl.rm_recipe_steps, os.path.join(workdir, "rm"), config,
                              overrides=rl.rm_recipe_overrides, init_from=pretrained),
            "checkpoints")})
    return config
