"""`jaxwrite tokenizer train|encode`: train a SentencePiece tokenizer; show the ids of a text."""
from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    parser = subparsers.add_parser("tokenizer", help="train a SentencePiece tokenizer or encode text with one")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    train = actions.add_parser("train", help="train a SentencePiece tokenizer (writes tokenizer.model + configs)")
    train.add_argument("--input", nargs="+", required=True, metavar="FILE",
                       help="UTF-8 text files, one sentence a line")
    train.add_argument("--output", required=True, metavar="DIR", help="tokenizer directory to write")
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--model-type", choices=("bpe", "unigram"), default="bpe")
    train.add_argument("--character-coverage", type=float, default=0.9995)
    train.add_argument("--input-sentence-size", type=int, default=200_000,
                       help="lines sampled for training (0: all)")
    train.add_argument("--max-sentence-length", type=int, default=8192, help="longer lines are cut (bytes)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--threads", type=int, default=1, help="training threads (results depend on it)")
    train.set_defaults(func=run_train)

    encode = actions.add_parser("encode", help="print the token ids of a text (or of a one-turn chat)")
    encode.add_argument("--tokenizer", required=True, metavar="PATH", help="tokenizer directory or file")
    encode.add_argument("--text", required=True)
    encode.add_argument("--chat", action="store_true", help="wrap the text as one user turn of the chat template")
    encode.add_argument("--pieces", action="store_true", help="also print each id's vocabulary entry")
    encode.set_defaults(func=run_encode)


def run_train(args: argparse.Namespace) -> int:
    from jaxwrite.text import train_sentencepiece

    tok = train_sentencepiece(args.input, args.output, args.vocab_size, model_type=args.model_type,
                              character_coverage=args.character_coverage,
                              max_sentence_length=args.max_sentence_length,
                              input_sentence_size=args.input_sentence_size, seed=args.seed,
                              num_threads=args.threads,
                              option_names={"vocab_size": "--vocab-size",
                                            "character_coverage": "--character-coverage"})
    print(f"wrote {args.output}: vocab_size={tok.vocab_size} eos_ids={list(tok.eos_ids)} pad_id={tok.pad_id}")
    return 0


def run_encode(args: argparse.Namespace) -> int:
    from jaxwrite.text import load_tokenizer

    tok = load_tokenizer(args.tokenizer)
    if args.chat:
        ids = tok.encode_chat([{"role": "user", "content": args.text}])
    else:
        ids = tok.encode(args.text)
    print(" ".join(str(i) for i in ids))
    if args.pieces:
        print(json.dumps([tok.id_to_token(i) for i in ids], ensure_ascii=False))
    return 0
