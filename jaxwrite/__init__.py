"""jaxwrite: train and evaluate long-form writing models in JAX/Flax NNX.

Packages (dependencies point down this list only):
  cli -> evals, rl, train -> infer, kernels, models, parallel, text -> common
"""
__version__ = "0.1.0"
