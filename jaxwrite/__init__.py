"""jaxwrite: train and evaluate long-form writing models in JAX/Flax NNX.

Packages, dependencies pointing one way (docs/architecture.md's module map; tests/test_import_graph.py checks
both this list and every import against it):
  `cli -> quickstart -> prep, evals, rl`; `cli -> aot -> rl`; `prep -> evals -> chat -> infer`;
  `prep, rl -> train`; `rl, train -> kernels -> parallel`; `rl -> infer`;
  `train, infer -> checkpoint -> models -> parallel`;
  `prep, train, rl -> data_pipelines -> prompts, text`; `evals -> prompts`; everything `-> text -> common`.
"""
__version__ = "0.1.0"
