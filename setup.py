"""Installable jaxwrite: `pip install -e .` (extras: test, seqio, gpu, tpu, notebooks)."""
from setuptools import find_packages, setup

CORE = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "grain==0.2.18",
    "ml-collections==1.1.0",
    "sentencepiece==0.2.3",
    "tensorflow-datasets==4.9.10",
    "array-record>=0.8",
    "numpy>=2.4,<2.5",
    "tokenizers>=0.21",
    "safetensors>=0.4",
    "jinja2>=3.1",
    "tqdm>=4.66",
    "matplotlib>=3.8",
    "tensorboardX>=2.6",
    # `jaxwrite serve`: the OpenAI-compatible server runs on an ASGI stack (FastAPI on uvicorn, SSE).
    "fastapi>=0.110",
    "uvicorn>=0.30",
    "sse-starlette>=2.0",
]

EXTRAS = {
    # Hugging Face parity tests: torch CPU build (local wheel) + transformers.
    # ... and the notebook runner, since CI executes the notebooks.
    "test": ["pytest>=8", "pytest-timeout>=2.3", "torch==2.13.0", "transformers>=4.51",
             "nbformat>=5.9", "nbclient>=0.10", "ipykernel>=6.29"],
    "seqio": ["seqio", "tensorflow-cpu"],
    "gpu": ["jax[cuda12]==0.10.2"],
    "tpu": ["jax[tpu]==0.10.2"],
    "notebooks": ["nbformat>=5.9", "nbclient>=0.10", "ipykernel>=6.29"],
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
    package_data={"jaxwrite": ["resources/*", "evals/*.json"], "data_pipelines": ["*.json"]},
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["jaxwrite=jaxwrite.cli:main"]},
)
