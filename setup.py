"""Installable jaxwrite: `pip install -e .` (extras: test, seqio, gpu, tpu, notebooks, wandb, gcs).

Versions are ranges, so jaxwrite installs into a Colab, Kaggle or TPU VM image and keeps the image's own
JAX. Each lower bound is the version CI runs (.ci/lower-bounds.txt pins exactly these, and
tests/test_dependencies.py checks the two agree and that every imported package is declared here); each
upper bound stops before the next release line that may change an API jaxwrite uses (for JAX and its
0.x companions the next minor line after the newest one released, else the next major).
"""
from setuptools import find_packages, setup

CORE = [
    "jax>=0.10.2,<0.13",
    "jaxlib>=0.10.2,<0.13",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8,<0.3",
    "orbax-checkpoint>=0.12.8,<0.13",
    "grain>=0.2.18,<0.3",
    "ml-collections>=1.1.0,<2",
    "ml-dtypes>=0.7.0,<1",               # bfloat16 / float8 arrays read from safetensors
    "etils[epath]>=1.15.0,<2",           # gs:// and local paths behind one API (workdirs, outputs)
    "sentencepiece>=0.2.3,<0.3",
    "tensorflow-datasets>=4.9.10,<5",
    "array-record>=0.8.6,<0.9",
    "numpy>=2.4.6,<3",
    "scipy>=1.17.1,<2",                  # sparse n-gram counts of the repetition reward
    "tokenizers>=0.23.3,<1",
    "safetensors>=0.8.0,<1",
    "gguf>=0.19.0,<1",                   # llama.cpp's GGUF reader: `.gguf` models wherever a model dir is taken
    "huggingface-hub>=2.4.0,<3",         # `--model ORG/NAME`: hub ids resolved to a local snapshot
    "jinja2>=3.1.6,<4",
    "tqdm>=4.70.1,<5",
    "matplotlib>=3.11.2,<4",
    "tensorboardX>=2.6.5,<3",
    "markdown-it-py>=4.3.0,<5",          # report.html: the sections' Markdown rendered (CommonMark + tables)
    # `jaxwrite serve`: the OpenAI-compatible server runs on an ASGI stack (FastAPI on uvicorn, SSE).
    "fastapi>=0.165.0,<1",
    "starlette>=1.10.0,<2",
    "uvicorn>=0.54.0,<1",
    "h11>=0.16.0,<1",
    "sse-starlette>=3.7.0,<4",
]

EXTRAS = {
    # Hugging Face parity tests: torch CPU build (local wheel) + transformers.
    # ... and the notebook runner, since CI executes the notebooks.
    # accelerate: transformers' own GGUF loading, the reference of tests/test_gguf_smollm2.py.
    "test": ["pytest>=9.0.3,<10", "pytest-timeout>=2.4.0,<3", "torch==2.13.0", "transformers>=5.24.0,<6",
             "accelerate>=1.15.0,<2",
             "nbformat>=5.11.1,<6", "nbclient>=0.11.0,<1", "ipykernel>=7.4.0,<8",
             "ruff>=0.17.5,<0.18"],   # the linter: tests/test_lint.py runs `ruff check` over the repository
    "seqio": ["seqio", "tensorflow-cpu"],
    # The accelerator builds: on an image that ships its own accelerator JAX (Colab, Kaggle, TPU VMs),
    # install jaxwrite without these and the image's JAX stays.
    "gpu": ["jax[cuda12]>=0.10.2,<0.13"],
    "tpu": ["jax[tpu]>=0.10.2,<0.13"],
    "notebooks": ["nbformat>=5.11.1,<6", "nbclient>=0.11.0,<1", "ipykernel>=7.4.0,<8"],
    # Optional experiment tracking (`--config.logging.wandb_project=`).
    "wandb": ["wandb>=0.31.0,<1"],
    # gs:// workdirs and outputs through fsspec (Orbax writes checkpoints to gs:// on its own).
    "gcs": ["etils[epath-gcs]>=1.15.0,<2"],
}

setup(
    name="jaxwrite",
    version="0.1.0",
    description="JAX toolkit for training and evaluating long-form writing models",
    python_requires=">=3.11",
    # configs/ stays browsable at the top of the repository and installs as jaxwrite.recipes.
    packages=find_packages(include=["jaxwrite", "jaxwrite.*", "data_pipelines", "data_pipelines.*"])
    + ["jaxwrite.recipes"],
    package_dir={"jaxwrite.recipes": "configs"},
    # sample_data/: the embedded data sample (its README lists each file's source and licence).
    package_data={"jaxwrite": ["resources/*", "prompts/*.json",
                               "sample_data/*", "sample_data/*/*", "sample_data/*/*/*", "sample_data/*/*/*/*"],
                  "data_pipelines": ["*.json"]},
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["jaxwrite=jaxwrite.cli:main"]},
)
