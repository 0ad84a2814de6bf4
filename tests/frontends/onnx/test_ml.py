"""Rules of frontends/onnx/ops/ml.py against onnxruntime (cases ONNX's node tests miss)."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from onnx_oracle import check_node  # noqa: E402


def test_tfidf_vectorizer_trigrams_with_skips():
    """Trigrams counted with gaps of 0 and 1 token (a trigram spans ``(n - 1) * (skip + 1)``
    positions past its first; ONNX's node tests stop at bigrams)."""
    x = np.array([[2, 3, 5, 2, 3, 5, 5, 3, 2, 2], [2, 9, 3, 9, 5, 5, 7, 3, 8, 2]], np.int64)
    pool = [2, 3, 5, 5, 3, 2, 3, 5, 5, 3, 2]  # unigrams 2 3 5, bigram (5 3), trigrams (2 3 5) (5 3 2)
    attrs = {
        "min_gram_length": 1,
        "max_gram_length": 3,
        "max_skip_count": 1,
        "mode": "TF",
        "ngram_counts": [0, 3, 5],
        "ngram_indexes": [0, 1, 2, 3, 4, 5],
        "pool_int64s": pool,
    }
    check_node("TfIdfVectorizer", {"x": x}, attrs)


def test_tfidf_vectorizer_idf_and_tfidf_weights():
    """Modes IDF (the weight where an n-gram occurs, else 0) and TFIDF (count times weight)."""
    x = np.array([[2, 3, 5, 2, 3, 5, 5], [7, 3, 8, 2, 9, 9, 3]], np.int64)
    attrs = {
        "min_gram_length": 1,
        "max_gram_length": 2,
        "max_skip_count": 0,
        "ngram_counts": [0, 3],
        "ngram_indexes": [0, 1, 2, 3],
        "pool_int64s": [2, 3, 5, 2, 3],  # unigrams 2 3 5, bigram (2 3)
        "weights": [0.5, 2.0, 3.0, 1.5],
    }
    for mode in ("IDF", "TFIDF"):
        check_node("TfIdfVectorizer", {"x": x}, {**attrs, "mode": mode})


def test_tfidf_vectorizer_of_a_1d_input_gives_a_1d_output():
    """A 1-D ``[C]`` input is one row: the output is ``[n_out]``, not ``[1, n_out]``."""
    x = np.array([2, 3, 5, 2, 3, 5, 5, 3], np.int64)
    attrs = {
        "min_gram_length": 1,
        "max_gram_length": 2,
        "max_skip_count": 0,
        "mode": "TF",
        "ngram_counts": [0, 3],
        "ngram_indexes": [0, 1, 2, 3],
        "pool_int64s": [2, 3, 5, 2, 3],  # unigrams 2 3 5, bigram (2 3)
    }
    check_node("TfIdfVectorizer", {"x": x}, attrs)


def test_tfidf_vectorizer_skips_wider_than_the_row_count_nothing():
    """Rows of 3 tokens with trigrams and up to 2 skipped tokens: a trigram with skips spans 4
    or 6 positions, more than the row has, and counts nothing (only the contiguous one can)."""
    x = np.array([[2, 3, 5], [5, 3, 2]], np.int64)
    attrs = {
        "min_gram_length": 3,
        "max_gram_length": 3,
        "max_skip_count": 2,
        "mode": "TF",
        "ngram_counts": [0, 0, 0],
        "ngram_indexes": [0, 1],
        "pool_int64s": [2, 3, 5, 5, 3, 2],  # trigrams (2 3 5) (5 3 2)
    }
    check_node("TfIdfVectorizer", {"x": x}, attrs)


def test_array_feature_extractor_takes_the_last_axis_of_a_3d_input():
    """ArrayFeatureExtractor picks its indices along the last axis whatever the rank (ONNX's
    node test has a 2-D input only), against onnxruntime."""
    import onnx
    import onnxruntime as ort
    from converter.frontends.onnx import from_onnx
    from onnx import helper

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([3, 0, 3], np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 3])],
        [onnx.numpy_helper.from_array(idx, "i")],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = from_onnx(model).to_jax()(x)
    assert want.shape == (2, 3, 3)
    np.testing.assert_array_equal(np.asarray(got), want)
