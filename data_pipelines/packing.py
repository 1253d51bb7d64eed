"""Packing tokenised examples into fixed [seq_len] rows with per-document segments.

An *example* is a dict of equal-length int32 vectors made before packing:
  tokens    [n]  model inputs
  targets   [n]  next token for each input (computed inside the example, so no target ever crosses
                 into another document)
  loss_mask [n]  1 where the target is trained on
An example longer than seq_len is split into consecutive pieces (each piece becomes its own segment
and its positions restart at 0), or raises when on_long="error". The split count is kept in the
iterator state so a run can report it.

Rows (after packing and batching) are dicts of numpy arrays:
  tokens, targets, segment_ids (1..k per row, 0 = padding), positions [B, T] int32; loss_mask [B, T] int32.
"""
from __future__ import annotations

from typing import Any, Sequence

import grain
import numpy as np

from jaxwrite.common import InputError

EXAMPLE_KEYS = ("tokens", "targets", "loss_mask")


def lm_example(ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Next-token example from one document's ids (already ending with EOS): every target trained."""
    ids = np.asarray(ids, dtype=np.int32)  # [n + 1]
    return {"tokens": ids[:-1], "targets": ids[1:], "loss_mask": np.ones(len(ids) - 1, np.int32)}


def masked_example(ids: Sequence[int], trained: Sequence[int]) -> dict[str, np.ndarray]:
    """Example whose loss covers only targets at ids positions where `trained` is 1.

    `trained[i]` says whether token i is one the model must learn to produce; the input at i-1
    predicts it, so the mask is shifted by one with the ids.
    """
    ids = np.asarray(ids, dtype=np.int32)  # [n + 1]
    trained = np.asarray(trained, dtype=np.int32)
    return {"tokens": ids[:-1], "targets": ids[1:], "loss_mask": trained[1:].copy()}


class SplitLongIterDataset(grain.IterDataset):
    """Splits examples longer than `seq_len` into consecutive pieces, or raises (on_long="error")."""

    def __init__(self, parent: grain.IterDataset, seq_len: int, on_long: str = "split"):
        super().__init__(parent)
        if on_long not in ("split", "error"):
            raise ValueError(f"on_long must be 'split' or 'error', got {on_long!r}")
        self._seq_len, self._on_long = seq_len, on_long

    def __iter__(self) -> "_SplitLongIterator":
        return _SplitLongIterator(self._parent.__iter__(), self._seq_len, self._on_long)


class _SplitLongIterator(grain.DatasetIterator):
    """State = parent state before the current example + index of the next piece of it."""

    def __init__(self, parent: grain.DatasetIterator, seq_len: int, on_long: str):
        super().__init__(parent)
        self._seq_len, self._on_long = seq_len, on_long
        self._current: dict[str, np.ndarray] | None = None
        self._parent_state_before = parent.get_state()
        self._piece = 0
        self.examples_split = 0

    def __next__(self) -> dict[str, np.ndarray]:
        if self._current is None:
            self._parent_state_before = self._parent.get_state()
            self._current = next(self._parent)
            self._piece = 0
            n = len(self._current["tokens"])
            if n > self._seq_len:
                if self._on_long == "error":
                    raise InputError(f"example of {n} tokens exceeds seq_len {self._seq_len} "
                                     "(set on_long='split' to split it)")
                self.examples_split += 1
        lo = self._piece * self._seq_len
        piece = {k: v[lo:lo + self._seq_len] for k, v in self._current.items()}
        self._piece += 1
        if lo + self._seq_len >= len(self._current["tokens"]):
            self._current = None
        return piece

    def get_state(self) -> dict[str, Any]:
        if self._current is None:
            return {"parent": self._parent.get_state(), "piece": 0, "examples_split": self.examples_split}
        return {"parent": self._parent_state_before, "piece": self._piece,
                "examples_split": self.examples_split}

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state["parent"])
        self.examples_split = state["examples_split"]
        self._current = None
        if state["piece"]:
            self._parent_state_before = state["parent"]
            self._current = next(self._parent)
        self._piece = state["piece"]


def _rename_packed(row: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """grain names packing metadata per feature; all features share it, so keep one copy."""
    return {"tokens": row["tokens"], "targets": row["targets"], "loss_mask": row["loss_mask"],
            "segment_ids": row["tokens_segment_ids"], "positions": row["tokens_positions"]}


def pack_and_batch(examples: grain.IterDataset, seq_len: int, batch_size: int,
                   num_packing_bins: int = 8, seed: int = 0, on_long: str = "split",
                   drop_remainder: bool = True) -> grain.IterDataset:
    """examples -> split long ones -> first-fit pack into [seq_len] rows -> [batch_size, seq_len] batches."""
    pieces = SplitLongIterDataset(examples, seq_len, on_long)
    lengths = {k: seq_len for k in EXAMPLE_KEYS}
    packed = grain.experimental.FirstFitPackIterDataset(
        pieces, length_struct=lengths, num_packing_bins=num_packing_bins, seed=seed, shuffle_bins=True)
    return packed.map(_rename_packed).batch(batch_size, drop_remainder=drop_remainder)


def pad_and_batch(examples: grain.IterDataset, seq_len: int, batch_size: int, pad_id: int = 0,
                  on_long: str = "split", drop_remainder: bool = True) -> grain.IterDataset:
    """One example per row (no packing), padded to seq_len: for objectives that need aligned rows."""
    pieces = SplitLongIterDataset(examples, seq_len, on_long)

    def pad(ex: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(ex["tokens"])
        row = {}
        for k in EXAMPLE_KEYS:
            out = np.zeros(seq_len, np.int32)  # [T]
            if k == "tokens":
                out[:] = pad_id
            out[:n] = ex[k]
            row[k] = out
        row["segment_ids"] = (np.arange(seq_len) < n).astype(np.int32)
        row["positions"] = np.where(row["segment_ids"] > 0, np.arange(seq_len), 0).astype(np.int32)
        return row

    return pieces.map(pad).batch(batch_size, drop_remainder=drop_remainder)
