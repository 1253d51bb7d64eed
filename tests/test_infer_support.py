"""Shared tiny setup for the inference tests: a SentencePiece tokenizer trained on synthetic text and a
random tiny Transformer (built once per process, so jitted engine steps compile once)."""
import functools
import random
import tempfile

from flax import nnx

from jaxwrite.infer import Engine
from jaxwrite.models import Transformer, get_preset
from jaxwrite.text import load_tokenizer, train_sentencepiece

_WORDS = ("the a writing model judge score reason story essay long form quality good bad plan answer "
          "think river night city 中文 写作").split()


@functools.lru_cache(maxsize=None)
def tokenizer_dir() -> str:
    rng = random.Random(0)
    lines = [" ".join(rng.choice(_WORDS) for _ in range(12))
             + f' {{"score": {rng.randint(1, 10)}, "reason": "ok"}} 0123456789 .,:;!?' for _ in range(300)]
    out = tempfile.mkdtemp(prefix="jaxwrite_infer_tok_")
    corpus = f"{out}/corpus.txt"
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    train_sentencepiece([corpus], f"{out}/sp", vocab_size=400)
    return f"{out}/sp"


@functools.lru_cache(maxsize=None)
def tokenizer():
    return load_tokenizer(tokenizer_dir())


@functools.lru_cache(maxsize=None)
def model(seed: int = 0):
    return Transformer(get_preset("tiny", vocab_size=tokenizer().vocab_size, max_seq_len=512), nnx.Rngs(seed))


def engine(**kwargs) -> Engine:
    kwargs.setdefault("chunk_steps", 8)
    kwargs.setdefault("max_batch", 8)
    return Engine(model(), tokenizer(), **kwargs)
