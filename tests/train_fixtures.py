"""Small synthetic corpora and a tokenizer for trainer tests (no shared data needed)."""
import os
import pathlib

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
WORDS = ("the sea ship whale captain storm night light house garden letter sister morning road river "
         "old young quiet bright long short said walked found under over between before after").split()


def write_corpus(root: pathlib.Path, books: int = 3, paragraphs: int = 120, seed: int = 0) -> pathlib.Path:
    """<root>/corpus_en/pg1.txt .. pgN.txt of seeded pseudo-English paragraphs."""
    rng = np.random.default_rng(seed)
    folder = root / "corpus_en"
    folder.mkdir(parents=True, exist_ok=True)
    for b in range(1, books + 1):
        paras = []
        for _ in range(paragraphs):
            sentences = [" ".join(rng.choice(WORDS, rng.integers(4, 12))).capitalize() + "."
                         for _ in range(rng.integers(2, 6))]
            paras.append(" ".join(sentences))
        (folder / f"pg{b}.txt").write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return root


def tiny_overrides(data_dir, tokenizer_dir, **extra) -> list[str]:
    """--config overrides making configs/cpt_tiny.py run in seconds on the synthetic corpus."""
    values = {"data_dir": str(data_dir), "tokenizer.path": str(tokenizer_dir), "data.seq_len": 64,
              "data.batch_size": 8, "data.eval_holdout": "('corpus_en/pg3.txt',)", "data.eval_batches": 2,
              "model.num_layers": 1, "progress_bar": False, "peak_flops_per_device": 1e12, **extra}
    return [f"--config.{k}={v}" for k, v in values.items()]


def train_tokenizer(data_dir: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    from jaxwrite.text import train_sentencepiece
    files = sorted(str(p) for p in (data_dir / "corpus_en").glob("pg*.txt"))
    train_sentencepiece(files, str(out), 320)
    return out


def subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def llama_hf_dir(root: pathlib.Path, shape: dict, vocab: int = 384):
    """A seeded random Llama saved as a Hugging Face dir at root/hf, with the SentencePiece tokenizer trained
    on root's corpus (write_corpus first) beside it: -> (HF dir, tokenizer dir, the transformers model)."""
    import shutil

    import torch
    import transformers

    tok = train_tokenizer(root, root / "tok")
    torch.manual_seed(0)
    hf_model = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=vocab, **shape)).float().eval()
    hf_model.save_pretrained(root / "hf")
    for f in tok.iterdir():
        shutil.copy(f, root / "hf")
    return root / "hf", tok, hf_model
