"""Numeric ops of the ``ai.onnx.ml`` domain: Binarizer, ArrayFeatureExtractor
(https://onnx.ai/onnx/operators/ onnx_aionnxml pages)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..registry import onnx_op

ML = "ai.onnx.ml"


@onnx_op("Binarizer", 1, domain=ML)
def binarizer(ctx, x, *, threshold=0.0):
    return jnp.where(x > threshold, 1, 0).astype(x.dtype)


@onnx_op("ArrayFeatureExtractor", 1, domain=ML)
def array_feature_extractor(ctx, x, indices):
    """Select ``indices`` along the last axis."""
    return jnp.take(x, jnp.asarray(indices).reshape(-1).astype(np.int64), axis=-1)


@onnx_op("TfIdfVectorizer", 9, domain="ai.onnx")
def tfidf_vectorizer(
    ctx,
    x,
    *,
    max_gram_length,
    max_skip_count,
    min_gram_length,
    mode,
    ngram_counts,
    ngram_indexes,
    pool_int64s=None,
    pool_strings=None,
    weights=None,
):
    """TfIdfVectorizer over integer tokens: count every pool n-gram (lengths
    ``min_gram_length..max_gram_length``, gaps ``0..max_skip_count`` between tokens) per row;
    TF = counts, IDF = weight where present, TFIDF = counts * weight."""
    if pool_int64s is None:
        raise NotImplementedError("TfIdfVectorizer over strings (pool_strings)")
    rows = x if x.ndim == 2 else x[None]
    length = rows.shape[1]
    pool = list(pool_int64s)
    starts = list(ngram_counts) + [len(pool)]
    n_out = max(ngram_indexes) + 1
    counts = [jnp.zeros(rows.shape[0], np.float32) for _ in range(n_out)]
    k = 0
    for n in range(1, len(starts)):
        grams = [pool[i : i + n] for i in range(starts[n - 1], starts[n], n)]
        for gram in grams:
            idx = ngram_indexes[k]
            k += 1
            if n < min_gram_length or n > max_gram_length:
                continue
            skips = [0] if n == 1 else range(max_skip_count + 1)
            for s in skips:
                span = (n - 1) * (s + 1)
                if span >= length:
                    continue
                hit = jnp.ones((rows.shape[0], length - span), bool)
                for j, tok in enumerate(gram):
                    off = j * (s + 1)
                    hit = hit & (rows[:, off : length - span + off] == tok)
                counts[idx] = counts[idx] + hit.sum(axis=1).astype(np.float32)
    out = jnp.stack(counts, axis=1)
    w = jnp.asarray(weights if weights is not None else np.ones(n_out), np.float32)
    if mode == "IDF":
        out = jnp.where(out > 0, 1.0, 0.0) * w
    elif mode == "TFIDF":
        out = out * w
    return out if x.ndim == 2 else out[0]
